# De-focus Mamba-L pre-trained on ImageNet-21K at 192 px (paper Table 7; the released
# classification/configs/defocus_mamba_large_22k.yaml): the start of the 384 px ImageNet-1K fine-tune,
# defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py. The paper reports no accuracy for this stage.
#
# Where the paper and the released yaml agree: 192 px, 90 epochs with 5 linear warm-up epochs then cosine per step,
# AdamW lr 1e-3 at batch 4096 (the yaml's BASE_LR 1.25e-4 x 4096 / 512), betas (0.9, 0.999), wd 0.05, EMA 0.9999,
# label smoothing 0.1, no RandAugment / color jitter / random erasing. From the yaml alone: warm-up from and cosine
# down to its default 5e-7 / 5e-6 x 4096 / 512, gradient clipping at 10, bf16 autocast, activation checkpointing,
# the auxiliary per-token loss, MLP heads (Linear 3D -> Tanh -> Linear, as in the fine-tune), no repeated
# augmentation. Batch 4096 = 64 GPUs x 64 (the yaml's per-GPU size; the paper's total).
#
# Where they differ:
# * Drop path: this config follows the paper, linear 0.1 -> 0.5 per epoch (DropPathScheduleHook); the yaml keeps a
#   constant 0.4 (use_scheduled_drop_path: False). The yaml's run:
#   --cfg-options custom_hooks.0.start=0.4 custom_hooks.0.end=0.4
# * Mixup / CutMix: the paper lists 0.8 / 1.0, which are the timm alphas the yaml also sets; the yaml applies mixing
#   to half the batches (MIXUP_PROB 0.5) and never picks CutMix (MIXUP_SWITCH_PROB 0). This config follows the yaml,
#   as the fine-tune does: Mixup (alpha 0.8) in half the batches.
#
# Data: mmpretrain's ImageNet21k layout and data set (`ImageNet21k`, as mmpretrain's
# _base_/datasets/imagenet21k_bs128.py): data/imagenet21k/train/<class>/<image> and data/imagenet21k/meta/train.txt
# (`<path> <label>` lines; without it the folders are scanned, which takes long). The released model has 21,841
# classes (the fall 2011 ImageNet-22K, classes in sorted synset order: the order map22kto1k.txt indexes), so the
# labels are 0..21840 in that order; mmpretrain's base config counts 21,842. The yaml validates on ImageNet-1K
# through map22kto1k.txt; mmpretrain has no such evaluator, so this config trains without a validation loop and the
# fine-tune evaluates.
#
# Its last checkpoint starts the fine-tune: mmengine's EMAHook saves the EMA weights as `state_dict` (the official
# convert_22k_to_1k.py also takes model_ema); see the fine-tune config. The released 21K weights load into this
# config after `defocus2mmcausal.py --ema` without --head-rows (README).
_base_ = './defocus-mamba-base_8xb64-300e_in1k.py'

num_classes = 21841
img_size = 192
model = dict(
    backbone=dict(arch='large', img_size=img_size, drop_path_rate=0.1, with_cp=True),
    head=dict(num_classes=num_classes, in_channels=1024, hidden_dims=3072),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8)], probs=[0.5]))  # the list replaces the base's
data_preprocessor = dict(num_classes=num_classes)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
# no loader evaluates here (above); this is the official evaluation transform at 192 px, for the tools that read
# the model's input size (FLOPs, inference)
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=219, edge='short', backend='pillow', interpolation='bicubic'),  # int(256/224*192)
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=64,
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True),
    dataset=dict(type='ImageNet21k', data_root='data/imagenet21k', split='train', pipeline=train_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None

warmup_epochs = 5
optim_wrapper = dict(optimizer=dict(lr=1.25e-4 * 4096 / 512))
param_scheduler = [
    dict(type='LinearLR', start_factor=5e-7 / 1.25e-4, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=5e-6 * 4096 / 512, by_epoch=True, begin=warmup_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=90)
auto_scale_lr = dict(base_batch_size=4096)
custom_hooks = [
    dict(type='DropPathScheduleHook', start=0.1, end=0.5),
    dict(type='EMAHook', momentum=1e-4, interval=1, priority='ABOVE_NORMAL'),  # timm ModelEma(0.9999)
]
