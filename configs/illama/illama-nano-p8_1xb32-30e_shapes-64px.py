# Tiny twin of the iLLaMA ImageNet recipe for CPU smoke runs on the embedded synthetic "shapes" data
# (ImageNet layout; generate it with `python tools/dataset_converters/make_shapes_datasets.py`).
# Same model, head, soft-mask hook and optimizer as illama-tiny-p16_32xb128_in1k.py; only data, size and
# schedule differ. Trains in about a minute on 2 CPU cores.
_base_ = './illama-tiny-p16_32xb128_in1k.py'

shape_classes = ('circle', 'cross', 'square', 'triangle')
data_root = 'data/shapes/imagenet'

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=64, num_layers=4, num_heads=2),
        img_size=64,
        patch_size=8),
    head=dict(num_classes=len(shape_classes), in_channels=64),
    train_cfg=dict(_delete_=True))
data_preprocessor = dict(num_classes=len(shape_classes))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.6, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
train_dataloader = dict(
    batch_size=32,
    num_workers=2,
    persistent_workers=True,
    dataset=dict(data_root=data_root, metainfo=dict(classes=shape_classes), pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=64,
    num_workers=2,
    persistent_workers=True,
    dataset=dict(data_root=data_root, metainfo=dict(classes=shape_classes), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
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
