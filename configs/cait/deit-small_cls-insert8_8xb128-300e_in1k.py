# Table 2 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), "Late insertion of class
# embedding", row "12 + 0, insertion layer 8": 80.0 top-1 (22M, 4.6 GFLOPs). DeiT-S (deit-small_8xb128-300e_in1k.py:
# class token at layer 0, 79.9) with the class token joining the patch tokens before block 8 (blocks 0-7 see the
# patches only; Sec. 3 "Later class token", Fig. 2 middle). DeiT-S has no LayerScale (the caption).
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(cls_insert_layer=8))
