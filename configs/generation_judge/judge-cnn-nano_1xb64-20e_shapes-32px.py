# The independent judge of the image-generation CPU twins: JudgeCNN (3 conv
# stages 32-64-128, GroupNorm, SiLU, max-pool; GAP -> 128-d -> 4 logits) trained on the real shapes images (ImageNet
# layout; `python tools/dataset_converters/make_shapes_datasets.py`), BOX-downsampled to 32 px as the twins see them,
# with horizontal flips (the 4 classes are flip-invariant) and nothing else, so that it judges whole, centred images.
# tools/generation/evaluate.py --extractor judge:work_dirs/judge-cnn-nano_1xb64-20e_shapes-32px/epoch_20.pth uses its
# accuracy on samples against their conditioning labels and its 128-d GAP features for the Fréchet distance and
# precision / recall (its first 7 channels of the last 8x8 map for the sFID-style distance).
_base_ = ['mmpretrain::_base_/default_runtime.py', '../_base_/datasets/shapes_imagenet.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

data_root = {{_base_.shapes_cls_data_root}}
image_size = 32

model = dict(
    type='ImageClassifier',
    backbone=dict(type='JudgeCNN', in_channels=3, channels=(32, 64, 128), num_groups=8),
    neck=dict(type='GlobalAveragePooling'),
    head=dict(type='LinearClsHead', num_classes={{_base_.shapes_cls_num_classes}}, in_channels=128,
              loss=dict(type='CrossEntropyLoss', loss_weight=1.0)))
# the generators' normalisation ([-1, 1]); the images arrive BGR from LoadImageFromFile
data_preprocessor = dict(num_classes={{_base_.shapes_cls_num_classes}}, mean=[127.5] * 3, std=[127.5] * 3,
                         to_rgb=True)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, backend='pillow', interpolation='box'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, backend='pillow', interpolation='box'),
    dict(type='PackInputs'),
]
dataset_type = 'ImageNet'
classes = {{_base_.shapes_cls_classes}}
train_dataloader = dict(
    batch_size=64, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(type=dataset_type, data_root=data_root, split='train', metainfo=dict(classes=classes),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=100, num_workers=2, persistent_workers=True, sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(type=dataset_type, data_root=data_root, split='val', metainfo=dict(classes=classes),
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

max_epochs = 20
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=3e-3, weight_decay=0.05))
param_scheduler = [dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=0, end=max_epochs,
                        convert_to_iter_based=True)]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=max_epochs)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(logger=dict(type='LoggerHook', interval=5),
                     checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False, deterministic=False)
