# Table 2 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), "DeiT-S with
# class-attention stage (SA+FFN)", row "12: 10 + 2, insertion layer 10": 80.3 top-1 (22M, 4.0 GFLOPs). DeiT-S
# (deit-small_8xb128-300e_in1k.py) with 10 self-attention blocks and no class token in them, then 2 class-attention
# block(s) (Sec. 3: the class token reads the fixed patch tokens; plain attention as in every CaiT CA block, no drop
# path there). No LayerScale in either stage (the caption: "Deit-Small (no LayerScale)"; residual_scale='none' applies
# to the CA blocks too).
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch=dict(num_layers=10, num_cls_layers=2), cls_insert_layer=None))
