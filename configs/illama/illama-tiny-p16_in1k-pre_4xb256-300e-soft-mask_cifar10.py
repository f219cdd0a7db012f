# iLLaMA-T fine-tuned on CIFAR-10 from its ImageNet-1K weights, with the soft mask (paper Table 9 "+ soft mask":
# 97.9 top-1). Recipe: paper Table 16 and App. C.5 (linear soft mask, cutoff 25 epochs for CIFAR-10, 50 for
# CIFAR-100); what the table leaves out is the official transfer code's
# (https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/r23_doit_tiny_cifar10.sh, main_soft_transfer.py,
# datasets_transfer.py), which the other CIFAR configs of this folder share:
#
# * resolution: the 32 x 32 images are upsampled to 224 x 224 (main_soft_transfer.py's default --input_size 224,
#   which the scripts keep; the model is built for 224). The ImageNet model's 14 x 14 position table and 16 px
#   patches are therefore used as they are, nothing is resized. Training: RandomResizedCrop to 224 (bicubic, area
#   0.08-1), flip, RandAugment (9, 0.5), random erasing 0.25; test: short side to 256 (bicubic), centre crop 224;
#   ImageNet mean / std.
# * AdamW lr 2e-3 @ 1024 (4 GPUs x 256), wd 0.05 (none on norms / biases / pos_embed / cls_token), 300 epochs,
#   50 linear warm-up epochs, cosine to 1e-6 (per iteration), drop path 0.0, mixup 0.8 / cutmix 1.0, label
#   smoothing 0.1, the official fp16 AMP (--use_amp true).
# * init: the converted official iLLaMA-T (tools/model_converters/illama2mmcausal.py, README) into the backbone;
#   the 10-class head starts from its init (the official fine-tuning drops a head of another shape).
# * mask_mode='official' (the released weights' post-softmax soft mask); alpha linear from 1 to 0 over the first
#   25 epochs (SoftMaskHook), 0 at validation.
#
# Data: mmpretrain's CIFAR10 reads data/cifar10/cifar-10-batches-py (the official python archive; it downloads
# the archive there if missing). data_root + data_prefix name that folder's parent (mmcausal's dataset check
# reads `split` as an ImageNet-style sub-folder, which CIFAR does not have).
_base_ = ['mmpretrain::_base_/default_runtime.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

pretrained = 'checkpoints/illama-tiny-p16_in1k.pth'
num_classes = 10
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='ILLaMA',
        arch='tiny',
        img_size=224,
        mask_mode='official',
        drop_path_rate=0.0,
        out_type='cls_token',
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=num_classes,
        in_channels=192,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

# CIFAR arrays are RGB already (to_rgb=False); the official code normalises with ImageNet's mean / std.
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
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root='data', data_prefix='cifar10', split='train',
                 pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    dataset=dict(type=dataset_type, data_root='data', data_prefix='cifar10', split='test',
                 pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

# AMP dtype: fp16 (dynamic loss scale), the official transfer runs' torch.cuda.amp (--use_amp true).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.pos_embed': dict(decay_mult=0.0),
            '.cls_token': dict(decay_mult=0.0),
        }))
max_epochs = 300
warmup_epochs = 50
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=warmup_epochs, end=max_epochs,
         convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=1024)

# Soft mask (App. C.5): alpha from 1 (bidirectional) to 0 (causal) over the first 25 epochs, then 0.
custom_hooks = [dict(type='SoftMaskHook', schedule='linear', cutoff=25, by_epoch=True, start=1.0)]
