# Teacher twin: the ResNet-18 the distillation twins learn from, trained on the embedded synthetic "shapes" data
# (ImageNet layout; `python tools/dataset_converters/make_shapes_datasets.py`). It stands in, at CPU size, for the
# convnet teachers of DeiT and CaiT (RegNetY-16GF): a network with the inductive biases of convolutions whose
# predictions the transformer students are trained to match.
#
# mmpretrain's ResNet-18 recipe (resnet18_8xb32_in1k.py: 18 layers of basic blocks, GAP, linear head, CE, SGD with
# momentum 0.9 and weight decay 1e-4) with: widths 16-32-64-128 (base_channels 16 instead of 64: 16x fewer
# multiply-adds), 64 px shapes crops and flips, batch 64, lr 0.05 with 1 warm-up epoch and a cosine decay over 60 epochs
# (the stock step schedule needs 100), top-1 only (4 classes). 89 top-1 on a v3 draw of the shapes data (70 s on one
# core; 30 epochs: 66), where the CaiT tiny twin trained alone reaches about 45.
_base_ = ['mmpretrain::resnet/resnet18_8xb32_in1k.py', '../_base_/datasets/shapes_imagenet.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

data_root = {{_base_.shapes_cls_data_root}}
base_channels = 16
model = dict(
    backbone=dict(base_channels=base_channels),
    head=dict(num_classes={{_base_.shapes_cls_num_classes}}, in_channels=8 * base_channels, topk=(1, )))
data_preprocessor = dict(num_classes={{_base_.shapes_cls_num_classes}})

train_pipeline = {{_base_.shapes_cls_train_pipeline}}
test_pipeline = {{_base_.shapes_cls_test_pipeline}}
train_dataloader = dict(batch_size=64, num_workers=2, persistent_workers=True,
                        dataset={{_base_.shapes_cls_train_dataset}})
val_dataloader = {{_base_.shapes_cls_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_cls_val_evaluator}}
test_evaluator = val_evaluator

max_epochs = 60
optim_wrapper = dict(optimizer=dict(lr=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, begin=0, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - 1, eta_min=0., by_epoch=True, begin=1, end=max_epochs,
         convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs,
                 val_interval=max_epochs)
auto_scale_lr = dict(base_batch_size=64)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False)
