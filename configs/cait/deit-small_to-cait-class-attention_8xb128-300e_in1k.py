# Table 8 row 7 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ CaiT architecture
# [specialized class-attention layers]", 83.2 top-1 (68M, 13.9 GFLOPs). The previous rung (deit-small_to-cait-dr0.2,
# 83.0) without the class token in the self-attention blocks: the class token reads the patch tokens in two
# class-attention blocks after them (Sec. 3; LayerScale 1e-6 and no drop path in those blocks, as the official code).
# The model is now CaiT-S36 (arch 's36', 68,220,712 parameters with the 1000-class head) trained 300 epochs and tested
# at crop ratio 0.875.
_base_ = './deit-small_to-cait-dr0.2_8xb128-300e_in1k.py'

model = dict(backbone=dict(cls_insert_layer=None))
