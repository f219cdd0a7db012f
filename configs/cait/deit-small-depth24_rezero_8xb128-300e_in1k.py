# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 24, column "Rezero":
# 80.8 top-1. The row's adjusted-d_r config (deit-small-depth24_dr0.2_8xb128-300e_in1k.py, uniform d_r 0.2) with
# ReZero (Bachlechner et al. 2020) adapted: one learned scalar alpha per residual branch, starting at 0 (Eq. 3 with
# the pre-norm, Fig. 1(c)).
#
# The Table 1 methods keep DeiT's pre-norm LayerNorm and its 5 warm-up epochs (the caption: "we have re-introduced the
# Layer-normalization and warmup") and plain 6-head attention (Table 1 precedes the talking heads of Table 8). The
# caption adapts d_r "for all the methods" but prints it for the baseline only; every method of a row takes that row's
# adjusted d_r (our choice).
_base_ = './deit-small-depth24_dr0.2_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='scalar', layer_scale_init_value=0.))
