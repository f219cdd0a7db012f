# CaiT-M36 at 224 px with DeiT hard distillation from RegNetY-16GF: the first stage of the released M36_384.pth
# (paper Table 3, M-36Υ: 85.1 top-1 at 224; 83.8 without distillation), which
# cait-m36_dist-regnety-16gf_32xb8-60e_in1k-384px.py fine-tunes. The M36 recipe (cait-m36_8xb128-400e_in1k.py) with the
# distillation of cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py.
_base_ = ['./cait-m36_8xb128-400e_in1k.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
