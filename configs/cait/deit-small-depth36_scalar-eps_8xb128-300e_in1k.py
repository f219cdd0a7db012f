# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 36, column "alpha =
# eps": 81.6 top-1. The row's adjusted-d_r config (deit-small-depth36_dr0.25_8xb128-300e_in1k.py, uniform d_r 0.25)
# with one learned scalar alpha per branch starting at LayerScale's eps = 1e-6 (the Sec. 2 rule: 0.1 up to depth 18,
# 1e-5 at 24, 1e-6 deeper).
#
# The Table 1 methods keep DeiT's pre-norm LayerNorm and its 5 warm-up epochs (the caption: "we have re-introduced the
# Layer-normalization and warmup") and plain 6-head attention (Table 1 precedes the talking heads of Table 8). The
# caption adapts d_r "for all the methods" but prints it for the baseline only; every method of a row takes that row's
# adjusted d_r (our choice).
_base_ = './deit-small-depth36_dr0.25_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='scalar', layer_scale_init_value=1e-6))
