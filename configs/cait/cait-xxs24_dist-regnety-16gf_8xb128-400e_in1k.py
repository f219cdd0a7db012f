# CaiT-XXS24 at 224 px with DeiT hard distillation from RegNetY-16GF: the training of the released XXS24_224.pth
# (paper Table 3, XXS-24Υ: 78.4 top-1; 77.6 without). The XXS24 recipe (cait-xxs24_8xb128-400e_in1k.py) with the
# distillation of cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py.
_base_ = ['./cait-xxs24_8xb128-400e_in1k.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
