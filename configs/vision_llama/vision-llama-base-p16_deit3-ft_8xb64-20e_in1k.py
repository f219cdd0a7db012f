# Supervised plain VisionLLaMA-B on ImageNet-1K, stage 2 of 2: 20 epochs at 224 px from the 192 px stage 1
# vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py (VisionLLaMA paper Table 2: 83.6 % top-1, 86M parameters).
# Source: the official fine-tune command of deit/train_plain_800.sh (the DeiT-III fine-tune at 224 px): batch 512 =
# 8 GPUs x 64, AdamW lr 1e-5 (unscaled), wd 0.1 (none on 1-D parameters and the class token), 5 linear warm-up epochs
# from 1e-6 then timm's cosine to its min_lr 1e-5 (= the lr: constant), 20 epochs, softmax cross-entropy with label
# smoothing 0.1, RandAugment m9-mstd0.5, mixup 0.8, cutmix 1.0, no repeated augmentation, no 3-Augment,
# drop path as in stage 1, fp16 AMP, evaluation at 224 px with crop ratio 1.0. The model, optimizer rules and the
# mmpretrain components are stage 1's; integer 2D RoPE grows from the stage-1 grid to 14 x 14 (no auto-scaling,
# as the official model).
# Random erasing: none (the Base command sets --reprob 0.0).
_base_ = './vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py'

# the 800-epoch checkpoint of stage 1 (the whole classifier, head included, as the official --finetune)
load_from = 'work_dirs/vision-llama-base-p16_deit3_8xb256-800e_in1k-192px/epoch_800.pth'

img_size = 224
model = dict(
    backbone=dict(img_size=img_size),
    head=dict(loss=dict(_delete_=True, type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')))

bgr_mean = [103.53, 116.28, 123.675]
bgr_std = [57.375, 57.12, 58.395]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',  # timm's rand-m9-mstd0.5-inc1, as mmpretrain's DeiT-III pipeline
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=img_size, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=64,
    dataset=dict(pipeline=train_pipeline),
    sampler=dict(_delete_=True, type='DefaultSampler', shuffle=True))
val_dataloader = dict(batch_size=64, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

lr, warmup_epochs, max_epochs = 1e-5, 5, 20
optim_wrapper = dict(optimizer=dict(_delete_=True, type='AdamW', lr=lr, weight_decay=0.1, eps=1e-8, betas=(0.9, 0.999)))
# timm's cosine ends at its min_lr 1e-5, which equals this lr: flat after the warm-up
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / lr, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         T_max=max_epochs - warmup_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
auto_scale_lr = dict(base_batch_size=512)
