# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 12, column "Fixup":
# 80.7 top-1. The row's adjusted-d_r config (deit-small-depth12_dr0.05_8xb128-300e_in1k.py, uniform d_r 0.05) with
# Fixup (Zhang et al. 2019) adapted: one learned scalar alpha per branch starting at 1 (Fig. 1(b)), the last layer of
# each branch (proj, fc2) starting at 0 and the first (qkv, fc1) scaled by L^(-1/2), L = 2 x depth branches of 2
# layers (Fixup's rules; its scalar biases are not added, every Linear has a bias, and its zero classifier is not
# applied, the head keeps DeiT's init; mmcausal/models/cait/residual_scaling.py).
#
# The Table 1 methods keep DeiT's pre-norm LayerNorm and its 5 warm-up epochs (the caption: "we have re-introduced the
# Layer-normalization and warmup") and plain 6-head attention (Table 1 precedes the talking heads of Table 8). The
# caption adapts d_r "for all the methods" but prints it for the baseline only; every method of a row takes that row's
# adjusted d_r (our choice).
_base_ = './deit-small-depth12_dr0.05_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='scalar', layer_scale_init_value=1., branch_init='fixup'))
