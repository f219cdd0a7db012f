# CaiT-S24 fine-tuned at 384 px with DeiT hard distillation from RegNetY-16GF (↑384Υ): how the released S24_384.pth
# was made (paper Table 3: 85.1 top-1; 84.3 without distillation). The ↑384 recipe of cait-s24_8xb32-60e_in1k-384px.py
# (the deit maintainers' published fine-tuning recipe, https://github.com/facebookresearch/deit/issues/108, which
# trains WITH distillation) and the distillation of cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py; the teacher sees the
# student's 384 px batch (deit feeds both the same images).
# Start: the released, distilled S24_224.pth converted to checkpoints/cait-s24_in1k-224px.pth (README: conversion);
# pos_embed is resized from the 14x14 to the 24x24 grid on load. Or the 224 px stage of
# cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py: --cfg-options load_from=work_dirs/.../epoch_400.pth.
_base_ = ['./cait-s24_8xb32-60e_in1k-384px.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
load_from = 'checkpoints/cait-s24_in1k-224px.pth'
