# Table 2 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), "DeiT-S with
# class-attention stage (SA+FFN)", row "12: 9 + 3, insertion layer 9": 79.6 top-1 (22M, 3.6 GFLOPs). DeiT-S
# (deit-small_8xb128-300e_in1k.py) with 9 self-attention blocks and no class token in them, then 3 class-attention
# block(s) (Sec. 3: the class token reads the fixed patch tokens; plain attention as in every CaiT CA block, no drop
# path there). No LayerScale in either stage (the caption: "Deit-Small (no LayerScale)"; residual_scale='none' applies
# to the CA blocks too).
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch=dict(num_layers=9, num_cls_layers=3), cls_insert_layer=None))
