# Tiny twin of the CIFAR transfer configs for CPU smoke runs: the embedded shapes data in the CIFAR-10 python
# layout (4 classes, 32 px; `python tools/dataset_converters/make_shapes_datasets.py --which cifar10` writes
# data/shapes/cifar10/cifar-10-batches-py), read by mmpretrain's CIFAR10 loader without the checksums of the official
# files (mmcausal.datasets.UncheckedCIFAR10).
# Same model type, head, loss, soft-mask hook (linear) and optimizer as
# illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py; it differs in size (4 blocks of width 64, patch 4 on
# the native 32 px images: the same 8 x 8 grid as 16 px patches of a 128 px image, where the full config upsamples to
# 224 px), in starting from scratch (no ImageNet weights to fine-tune), without mixup / cutmix / RandAugment /
# random erasing, and in the schedule (fp32, lr 3e-3 @ 64, 12 epochs, the soft mask linear over the first 3).
# Seeds 0 / 1 / 2 on the embedded draw: 81.5 / 78.5 / 83.0 % top-1 (chance 25 %).
_base_ = ['./illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py']

shapes_classes = ('circle', 'cross', 'square', 'triangle')
num_classes = len(shapes_classes)
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=64, num_layers=4, num_heads=2),
        img_size=32,
        patch_size=4,
        init_cfg=None),
    head=dict(num_classes=num_classes, in_channels=64),
    train_cfg=dict(_delete_=True))
data_preprocessor = dict(num_classes=num_classes)

train_pipeline = [
    dict(type='RandomResizedCrop', scale=32, crop_ratio_range=(0.6, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='PackInputs')]
dataset_type = 'UncheckedCIFAR10'
shapes_cifar10 = dict(type=dataset_type, data_root='data/shapes', data_prefix='cifar10',
                      metainfo=dict(classes=shapes_classes))
train_dataloader = dict(batch_size=64, num_workers=2, dataset=dict(**shapes_cifar10, pipeline=train_pipeline))
val_dataloader = dict(batch_size=100, num_workers=2, dataset=dict(**shapes_cifar10, pipeline=test_pipeline))
test_dataloader = val_dataloader

max_epochs = 12
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(lr=3e-3))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=1, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
auto_scale_lr = dict(base_batch_size=64)
custom_hooks = [dict(type='SoftMaskHook', schedule='linear', cutoff=3, by_epoch=True, start=1.0)]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=4),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0)
