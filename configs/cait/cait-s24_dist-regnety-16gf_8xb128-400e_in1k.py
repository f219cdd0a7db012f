# CaiT-S24 at 224 px with DeiT hard distillation from RegNetY-16GF: the training of the released S24_224.pth (paper
# Table 3, S-24Υ: 83.5 top-1; 82.7 without distillation). Everything else is cait-s24_8xb128-400e_in1k.py (paper
# Sec. 4.3).
#
# Distillation (paper Sec. 4.3 and App. B, the DeiT paper's hard distillation; ../_base_/distillation/
# hard_regnety-16gf.py): on the single class head, the average of the label loss (here the head's label-smoothed CE on
# the mixed targets, as deit's base criterion) and the CE to the teacher's argmax, no distillation token (App. B: a
# token brings nothing for CaiT). The teacher sees the mixed (mixup / cutmix) batch at the student's 224 px, as in deit.
_base_ = ['./cait-s24_8xb128-400e_in1k.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
