# Supervised plain VisionLLaMA-S on ImageNet-1K: 800 epochs at 224 px, no fine-tune stage (VisionLLaMA paper Table 2:
# 81.6 % top-1, 22M parameters). Source: the official DeiT-III recipe of deit/train_plain_800.sh (model
# vit_llama_rope_small_patch16): the recipe of vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py (its header lists
# every setting and where mmpretrain's components differ from the official code) with 224 px, LAMB lr 4e-3
# (unscaled) and drop path 0.05. Paper and code agree on this model.
_base_ = './vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py'

img_size = 224
model = dict(backbone=dict(arch='small', img_size=img_size, drop_path_rate=0.05), head=dict(in_channels=384))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    {{_base_.three_augment}},
    dict(type='ColorJitter', brightness=0.3, contrast=0.3, saturation=0.3),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=img_size, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

lr, warmup_epochs, max_epochs = 4e-3, 5, 800
optim_wrapper = dict(optimizer=dict(lr=lr))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / lr, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         T_max=max_epochs - warmup_epochs, convert_to_iter_based=True),
]
