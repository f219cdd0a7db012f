# CaiT-XXS24 fine-tuned at 384 px with DeiT hard distillation from RegNetY-16GF (↑384Υ): how the released
# XXS24_384.pth was made (paper Table 3: 80.9 top-1; 80.4 without). cait-xxs24_8xb32-60e_in1k-384px.py with the
# distillation and the start of cait-s24_dist-regnety-16gf_8xb32-60e_in1k-384px.py: the released XXS24_224.pth,
# converted to checkpoints/cait-xxs24_in1k-224px.pth.
_base_ = ['./cait-xxs24_8xb32-60e_in1k-384px.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
load_from = 'checkpoints/cait-xxs24_in1k-224px.pth'
