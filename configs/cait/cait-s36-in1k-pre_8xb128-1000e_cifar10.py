# CaiT-S36 fine-tuned on CIFAR-10 from its ImageNet-1K model: the transfer recipe of the CaiT paper (Touvron et al.,
# "Going deeper with Image Transformers", ICCV 2021, Sec. 4.4.3, Table 7 row "CaiT-S-36 224": 99.2 top-1; the
# distilled S-36Υ, also 99.2, is not this config's: "We have not used distillation for this finetuning"). The base of
# every `cait-*-in1k-pre_*` transfer config in this folder.
#
# Table 7 reports CaiT-S-36 and CaiT-M-36 (with and without distillation): the S36 configs follow the S-36 row, the
# M36 ones (cait-m36-in1k-pre_*.py) the M-36 row.
#
# Recipe (Sec. 4.4.3: "the same hyperparameters as for training. We only decrease the learning rates by a factor 10
# (for CARS, Flowers, iNaturalist), 100 (for CIFAR-100, CIFAR-10) and adapt the number of epochs (1000 for CIFAR-100,
# CIFAR-10, Flowers-102 and Cars-196, 360 for iNaturalist 2018 and 2019)"):
# - everything of cait-s36_8xb128-400e_in1k.py (S-36 of Table 4: drop path 0.2 uniform, LayerScale 1e-6; batch 1024
#   with repeated augmentation x3, AdamW, wd 0.05, 5 warm-up epochs + cosine, RandAugment, mixup 0.8 / cutmix 1.0,
#   label smoothing 0.1, random erasing 0.25, fp16);
# - lr 1e-3 / 100 = 1e-5 at batch 1024, 1000 epochs. The whole lr schedule is scaled by 1/100: warm-up start 1e-8 and
#   cosine floor 1e-7 (deit's --warmup-lr 1e-6 and --min-lr 1e-5, /100). Our reading: taken literally, deit's
#   unscaled floor of 1e-5 would equal the CIFAR peak and leave no cosine decay.
# - resolution 224 (Table 7: "trained and evaluated at resolution 224 and with a crop-ratio of 0.875"): the 32 x 32
#   images are upsampled by the 224 px RandomResizedCrop (bicubic), as deit's transfer pipeline does; the
#   ImageNet model's 14 x 14 position table is used as it is. Test: short side to int(224 / 0.875) = 256 (bicubic),
#   centre crop 224. ImageNet mean / std.
# - init: the backbone of the 224 px ImageNet model (cait-s36_8xb128-400e_in1k.py's last checkpoint; the released
#   S36_384.pth is distilled and at 384 px); the 10-class head starts from its init.
#
# Data: mmpretrain's CIFAR10 reads data/cifar10/cifar-10-batches-py (the official python archive; it downloads the
# archive there if missing). data_root + data_prefix name that folder's parent (mmcausal's dataset check reads
# `split` as an ImageNet-style sub-folder, which CIFAR does not have). CIFAR arrays are RGB already (to_rgb=False).
_base_ = './cait-s36_8xb128-400e_in1k.py'

pretrained = 'work_dirs/cait-s36_8xb128-400e_in1k/epoch_400.pth'
num_classes = 10
model = dict(
    backbone=dict(init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    head=dict(num_classes=num_classes))

rgb_mean = [123.675, 116.28, 103.53]
rgb_std = [58.395, 57.12, 57.375]
data_preprocessor = dict(num_classes=num_classes, mean=rgb_mean, std=rgb_std, to_rgb=False)
train_pipeline = [
    dict(type='RandomResizedCrop', scale=224, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='RandAugment', policies='timm_increasing', num_policies=2, total_level=10, magnitude_level=9,
         magnitude_std=0.5, hparams=dict(pad_val=[round(x) for x in rgb_mean], interpolation='bicubic')),
    dict(type='RandomErasing', erase_prob=0.25, mode='rand', min_area_ratio=0.02, max_area_ratio=1 / 3,
         fill_color=rgb_mean, fill_std=rgb_std),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
dataset_type = 'CIFAR10'
train_dataloader = dict(
    dataset=dict(_delete_=True, type=dataset_type, data_root='data', data_prefix='cifar10', split='train',
                 pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(_delete_=True, type=dataset_type, data_root='data', data_prefix='cifar10', split='test',
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

lr_factor = 1 / 100
lr = 1e-3 * lr_factor
warmup_epochs = 5
optim_wrapper = dict(optimizer=dict(lr=lr))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / 1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5 * lr_factor, by_epoch=True, begin=warmup_epochs,
         convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=1000)
