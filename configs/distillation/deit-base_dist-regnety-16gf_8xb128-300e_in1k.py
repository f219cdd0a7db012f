# DeiT-B⚗: DeiT-Base with a distillation token, hard-distilled from RegNetY-16GF for 300 epochs; DeiT paper Table 5:
# 83.4 top-1 (DeiT-B without distillation: 81.8). The recipe and distillation of
# deit-small_dist-regnety-16gf_8xb128-300e_in1k.py (DeiT Table 9: the same for every size) with mmpretrain's
# DeiT-Base (deit-base-distilled_16xb64_in1k.py: 12 blocks of width 768, 12 heads).
_base_ = './deit-small_dist-regnety-16gf_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch='deit-base'), head=dict(in_channels=768))
