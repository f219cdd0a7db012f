# CaiT-S36 fine-tuned on Oxford Flowers-102 from its ImageNet-1K model: the transfer recipe of
# cait-s36-in1k-pre_8xb128-1000e_cifar10.py (paper Sec. 4.4.3: ImageNet hyper-parameters, 224 px, crop ratio 0.875)
# with Flowers' lr factor 1/10 (lr 1e-4, schedule scaled alike) and 1000 epochs. Paper (Table 7, CaiT-S-36 224): 98.8
# top-1.
# Data: mmpretrain's Flowers102 (data/flowers102 with jpg/, imagelabels.mat and setid.mat, the official files).
# Training on train + val (2,040 images, the paper's Table 6 count), test on the 6,149 test images; files loaded as
# BGR, ImageNet mean / std (the ImageNet pipeline of the base, test at crop ratio 0.875).
_base_ = './cait-s36-in1k-pre_8xb128-1000e_cifar10.py'

num_classes = 102
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(
    num_classes=num_classes, mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)
bgr_mean = [103.53, 116.28, 123.675]
bgr_std = [57.375, 57.12, 58.395]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9,
         magnitude_std=0.5, hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=bgr_mean, fill_std=bgr_std),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    dataset=dict(_delete_=True, type='Flowers102', data_root='data/flowers102', split='trainval',
                 pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(_delete_=True, type='Flowers102', data_root='data/flowers102', split='test',
                 pipeline=test_pipeline))
test_dataloader = val_dataloader

lr_factor = 1 / 10
lr = 1e-3 * lr_factor
optim_wrapper = dict(optimizer=dict(lr=lr))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / 1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5 * lr_factor, by_epoch=True, begin=5, convert_to_iter_based=True),
]
