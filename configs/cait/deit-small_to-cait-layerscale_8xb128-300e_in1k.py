# Table 8 row 5 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ Layer-scale [init
# eps=1e-6]", 80.5 top-1 (64M, 13.8 GFLOPs). The previous rung (deit-small_to-cait-depth36, 69.9, failed) with
# LayerScale on both branches of every block (Eq. 4: a per-channel diag(lambda), each lambda starting at 1e-6, the
# Sec. 2 rule for depth > 24).
_base_ = './deit-small_to-cait-depth36_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='layerscale', layer_scale_init_value=1e-6))
