# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 18, column "baseline
# d_r = 0.05": 80.1 top-1. DeiT-S (deit-small_8xb128-300e_in1k.py: plain attention, no residual weighting, class token
# at layer 0, 300 epochs) with 18 blocks and a uniform stochastic depth of 0.05 in every block (the caption: "same
# expected drop rate and performance as progressive stochastic depth of 0.1", DeiT's linear ramp).
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch=dict(num_layers=18), drop_path_rate=0.05, drop_path_schedule='uniform'))
