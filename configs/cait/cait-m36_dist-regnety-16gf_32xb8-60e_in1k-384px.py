# CaiT-M36 fine-tuned at 384 px with DeiT hard distillation from RegNetY-16GF (↑384Υ): how the released M36_384.pth
# was made (paper Table 3: 86.1 top-1; 84.9 without). cait-m36_32xb8-60e_in1k-384px.py with the distillation of
# cait-s24_dist-regnety-16gf_8xb32-60e_in1k-384px.py, from the 224 px distilled stage
# (cait-m36_dist-regnety-16gf_8xb128-400e_in1k.py; no 224 px M36 weights were released).
_base_ = ['./cait-m36_32xb8-60e_in1k-384px.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
load_from = 'work_dirs/cait-m36_dist-regnety-16gf_8xb128-400e_in1k/epoch_400.pth'
