# Table 1 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), depth 24, column "adjust
# [d_r]": 81.0 top-1 with d_r = 0.2. The row's baseline (deit-small-depth24_dr0.05_8xb128-300e_in1k.py) with its
# uniform stochastic depth raised from 0.05 to 0.2.
_base_ = './deit-small-depth24_dr0.05_8xb128-300e_in1k.py'

model = dict(backbone=dict(drop_path_rate=0.2))
