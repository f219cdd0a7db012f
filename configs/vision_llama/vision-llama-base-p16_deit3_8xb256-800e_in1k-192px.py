# Supervised plain VisionLLaMA-B on ImageNet-1K, stage 1 of 2: 800 epochs at 192 px (VisionLLaMA paper Table 2:
# 83.6 % top-1 after the 20-epoch 224 px fine-tune vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py, 86M parameters).
# Source: the official DeiT-III recipe (ImageNet1k_SFT.md, deit/train_plain_800.sh, deit/main_b.py, model
# vit_llama_rope_base_patch16 of deit/my_models.py): batch 2048 = 8 GPUs x 256,
# LAMB lr 3e-3 (not scaled by the batch: --unscale-lr) with the apex/timm LAMB defaults (eps 1e-8, global gradient
# norm clipped to 1 inside the optimizer), wd 0.05 (none on 1-D parameters -- norms, biases, LayerScale -- and the
# class token, timm's rule), 5 linear warm-up epochs from 1e-6 then cosine to 1e-5, binary cross-entropy, 3-Augment
# (random resized crop, flip, one of grayscale / solarize / Gaussian blur, colour jitter 0.3; no RandAugment, no
# random erasing), mixup 0.8, cutmix 1.0, no label smoothing, repeated augmentation (3 repeats), drop path 0.2 in
# every block, fp16 AMP, evaluation at the training size with crop ratio 1.0.
#
# mmpretrain's components: DeiT-III's test pipeline (ResizeEdge + CenterCrop, crop ratio 1.0) and model settings
# (Linear trunc-normal 0.02, LayerNorm 1/0, mixup / cutmix), its Lamb optimizer, RepeatAugSampler, and
# CrossEntropyLoss(use_sigmoid=True) for the BCE. Where they differ from the official code: (1) the official BCE
# binarises the mixed targets (targets > 0, DeiT-III's engine) and mmpretrain's sigmoid loss takes the soft mixed
# targets; (2) the official timm scheduler steps once per epoch and its cosine runs over all 800 epochs, mmpretrain's
# steps per iteration from the end of the warm-up.
#
# Model: layout='official_deit' (LayerScale 1e-4, a bias-free SwiGLU of width 2048, drop path in both branches and
# every block, the class token rotated like flat index -1 as under the official torch 1.7) with integer 2D RoPE on
# the 12 x 12 grid (rope_mode='2d': the official model never auto-scales). No weights were released; a deit
# checkpoint converts with tools/model_converters/visionllama2mmcausal.py.
_base_ = [
    'mmpretrain::_base_/models/deit3/deit3-base-p16-224.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_deit3_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs2048_rsb.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

img_size = 192
model = dict(
    backbone=dict(
        _delete_=True,  # drop DeiT3-only keys
        type='VisionLLaMA',
        arch='base',
        img_size=img_size,
        patch_size=16,
        layout='official_deit',
        rope_mode='2d',
        drop_path_rate=0.2),
    head=dict(
        _delete_=True,  # the deit model's plain linear head (keys head.fc.*)
        type='LinearClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='CrossEntropyLoss', use_sigmoid=True),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02)))

bgr_mean = [103.53, 116.28, 123.675]
three_augment = dict(
    type='RandomChoice',
    transforms=[
        # torchvision's Grayscale(3): ITU-R 601 luma, here on BGR images
        [dict(type='RandomGrayscale', prob=1.0, keep_channels=True, channel_weights=(0.114, 0.587, 0.299))],
        [dict(type='Solarize', thr=128, prob=1.0)],
        [dict(type='GaussianBlur', magnitude_range=(0.1, 2.0), magnitude_std='inf', prob=1.0)],  # radius U(0.1, 2)
    ])
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    three_augment,
    dict(type='ColorJitter', brightness=0.3, contrast=0.3, saturation=0.3),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=img_size, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,
    dataset=dict(pipeline=train_pipeline),
    sampler=dict(_delete_=True, type='RepeatAugSampler', num_repeats=3, shuffle=True))
val_dataloader = dict(batch_size=256, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

lr, warmup_epochs, max_epochs = 3e-3, 5, 800
# AMP dtype: fp16 (dynamic loss scale), the official torch.cuda.amp; bf16: --cfg-options optim_wrapper.dtype=bfloat16.
optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(type='Lamb', lr=lr, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999), max_grad_norm=1.0),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={'.cls_token': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / lr, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         T_max=max_epochs - warmup_epochs, convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
auto_scale_lr = dict(base_batch_size=2048)
