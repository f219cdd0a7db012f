# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 18, column "T-Fixup":
# 81.7 top-1. The row's adjusted-d_r config (deit-small-depth18_dr0.1_8xb128-300e_in1k.py, uniform d_r 0.1) with
# T-Fixup (Huang et al. 2020) adapted: one learned scalar alpha per branch starting at 1 (our choice: T-Fixup itself
# has no alpha, and 1 leaves its initialisation as it is), Xavier-uniform branch weights with v, proj and the MLP
# scaled by 0.67 N^(-1/4) (T-Fixup's encoder rule; mmcausal/models/cait/residual_scaling.py).
#
# The Table 1 methods keep DeiT's pre-norm LayerNorm and its 5 warm-up epochs (the caption: "we have re-introduced the
# Layer-normalization and warmup") and plain 6-head attention (Table 1 precedes the talking heads of Table 8). The
# caption adapts d_r "for all the methods" but prints it for the baseline only; every method of a row takes that row's
# adjusted d_r (our choice).
_base_ = './deit-small-depth18_dr0.1_8xb128-300e_in1k.py'

model = dict(backbone=dict(residual_scale='scalar', layer_scale_init_value=1., branch_init='t-fixup'))
