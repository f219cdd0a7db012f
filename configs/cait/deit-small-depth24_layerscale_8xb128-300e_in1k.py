# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 24, column
# "LayerScale": 82.4 top-1. The row's adjusted-d_r config (deit-small-depth24_dr0.2_8xb128-300e_in1k.py, uniform d_r
# 0.2) with LayerScale (Eq. 4): a per-channel diag(lambda) per branch, every lambda starting at eps = 1e-5 (the Sec. 2
# rule).
#
# The Table 1 methods keep DeiT's pre-norm LayerNorm and its 5 warm-up epochs (the caption: "we have re-introduced the
# Layer-normalization and warmup") and plain 6-head attention (Table 1 precedes the talking heads of Table 8). The
# caption adapts d_r "for all the methods" but prints it for the baseline only; every method of a row takes that row's
# adjusted d_r (our choice).
_base_ = './deit-small-depth24_dr0.2_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='layerscale', layer_scale_init_value=1e-5))
