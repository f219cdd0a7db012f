# The teacher of DeiT and CaiT distillation: RegNetY-16GF (Radosavovic et al. 2020) as the deit code trains with it
# (`--teacher-model regnety_160`, timm's model; 82.9 top-1, DeiT paper Table 2), weights
# https://dl.fbaipublicfiles.com/deit/regnety_160-a5fe301d.pth (deit's file: its `model` entry holds timm's keys, which
# mmpretrain's TimmClassifier keeps). mmpretrain has RegNetX only (no squeeze-excitation blocks), so the teacher is
# timm's network through mmpretrain's TimmClassifier: `pip install -r requirements/optional.txt` (timm) to build it.
# A distillation config points its model.teacher.config here; only `model` and `data_preprocessor` are read. The
# teacher sees the student's (mixed) batch, as deit feeds it: ImageNet mean / std on RGB, like every student here.
model = dict(type='TimmClassifier', model_name='regnety_160', num_classes=1000)
data_preprocessor = dict(mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
