# Supervised plain VisionLLaMA-L on ImageNet-1K, stage 2 of 2: 20 epochs at 224 px from the 128 px stage 1
# vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py (VisionLLaMA paper Table 2: 84.6 % top-1, 310M parameters;
# the default row of every Table 7 ablation).
# Source: the official fine-tune command of deit/train_plain_800.sh (the DeiT-III fine-tune at 224 px): batch 512 =
# 8 GPUs x 64, AdamW lr 1e-5 (unscaled), wd 0.1 (none on 1-D parameters and the class token), 5 linear warm-up epochs
# from 1e-6 then timm's cosine to its min_lr 1e-5 (= the lr: constant), 20 epochs, softmax cross-entropy with label
# smoothing 0.1, RandAugment m9-mstd0.5, mixup 0.8, cutmix 1.0, no repeated augmentation, no 3-Augment,
# drop path as in stage 1, fp16 AMP, evaluation at 224 px with crop ratio 1.0. The model, optimizer rules and the
# mmpretrain components are stage 1's; integer 2D RoPE grows from the stage-1 grid to 14 x 14 (no auto-scaling,
# as the official model).
# It is the Base fine-tune (vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py) with Large's model (as stage 1) and
# random erasing 0.25: the Large command leaves --reprob at main_b.py's default 0.25 (the Base command sets 0).
_base_ = './vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py'

# the 800-epoch checkpoint of stage 1 (the whole classifier, head included, as the official --finetune)
load_from = 'work_dirs/vision-llama-large-p16_deit3_8xb256-800e_in1k-128px/epoch_800.pth'
model = dict(backbone=dict(arch='large', drop_path_rate=0.45), head=dict(in_channels=1024))

img_size = 224
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
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=bgr_mean,
        fill_std=bgr_std),
    dict(type='PackInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
