# Tiny twin of the iLLaMA ImageNet recipe for CPU smoke runs on the embedded synthetic "shapes" data
# (ImageNet layout; generate it with `python tools/dataset_converters/make_shapes_datasets.py`).
# Same model, head, soft-mask hook and optimizer as illama-tiny-p16_32xb128_in1k.py; only data, size and
# schedule differ. Trains in about a minute on 2 CPU cores.
_base_ = ['./illama-tiny-p16_32xb128_in1k.py', '../_base_/datasets/shapes_imagenet.py']

data_root = {{_base_.shapes_cls_data_root}}

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=64, num_layers=4, num_heads=2),
        img_size=64,
        patch_size=8),
    head=dict(num_classes={{_base_.shapes_cls_num_classes}}, in_channels=64),
    train_cfg=dict(_delete_=True))
data_preprocessor = dict(num_classes={{_base_.shapes_cls_num_classes}})

# Data: ../_base_/datasets/shapes_imagenet.py (shared by every family's classification twin).
train_pipeline = {{_base_.shapes_cls_train_pipeline}}
test_pipeline = {{_base_.shapes_cls_test_pipeline}}
train_dataloader = {{_base_.shapes_cls_train_dataloader}}
val_dataloader = {{_base_.shapes_cls_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_cls_val_evaluator}}
test_evaluator = val_evaluator

max_epochs = 30
optim_wrapper = dict(optimizer=dict(lr=2e-3, weight_decay=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, end=2, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=2, end=max_epochs,
         convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs, val_interval=10)
auto_scale_lr = dict(base_batch_size=32)
custom_hooks = [dict(type='SoftMaskHook', schedule='constant', cutoff=5, by_epoch=True, start=1.0)]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=10, max_keep_ckpts=2))
randomness = dict(seed=0)
