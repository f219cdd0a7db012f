# Table 8, "+ Hard distillation [teacher: RegNetY-16GF]" (85.2): the ↑384 rung
# (deit-small_to-cait-384px_8xb32-60e_in1k-384px.py: CaiT-S36 fine-tuned at 384 px, tested at crop ratio 0.875) trained
# with DeiT hard distillation from RegNetY-16GF, as the released CaiT models were (../_base_/distillation/
# hard_regnety-16gf.py: the average of the label loss and the CE to the teacher's argmax on the single class head).
_base_ = ['./deit-small_to-cait-384px_8xb32-60e_in1k-384px.py', '../_base_/distillation/hard_regnety-16gf.py']

model = {{_base_.regnety_16gf_hard_distillation}}
