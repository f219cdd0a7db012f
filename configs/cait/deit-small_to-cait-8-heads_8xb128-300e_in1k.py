# Table 8 row 2 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ More heads [8]",
# 80.0 top-1 (22M parameters, 4.6 GFLOPs). The previous rung (deit-small_8xb128-300e_in1k.py, DeiT-S, 79.9) with 8
# heads of 48 channels instead of 6 of 64 (Sec. 4.5.2 and Table 9: CaiT keeps 48 channels per head). Nothing else
# changes.
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch=dict(num_heads=8)))
