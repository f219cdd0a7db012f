# DeiT hard distillation from RegNetY-16GF, as the released CaiT models and DeiT's distilled models were trained: a
# block a student config merges into its model (list this file after the student config in `_base_`,
# `model = {{_base_.regnety_16gf_hard_distillation}}`, or the teacher alone: `teacher={{_base_.regnety_16gf_teacher}}`;
# only these prefixed variables are defined, so the two bases do not clash). The loss: (1 - alpha) x the head's label
# loss + alpha x CE to the teacher's argmax, alpha 0.5 (the average of the two, DeiT eq. 3). The teacher
# (../teachers/regnety-16gf_deit-in1k.py, deit's weights, needs timm) sees the student's mixed batch at the student's
# resolution, runs frozen, and is not saved in the checkpoints.
regnety_16gf_teacher = dict(
    config='{{fileDirname}}/../teachers/regnety-16gf_deit-in1k.py',
    checkpoint='https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth')
regnety_16gf_hard_distillation = dict(
    type='DistillationClassifier', teacher=regnety_16gf_teacher, distillation=dict(mode='hard'), alpha=0.5)
