# DeiT-S⚗ (Touvron et al., "Training data-efficient image transformers & distillation through attention", ICML 2021):
# DeiT-Small with a distillation token, hard-distilled from RegNetY-16GF for 300 epochs; DeiT paper Table 5: 81.2 top-1
# (DeiT-S without distillation: 79.8). mmpretrain ships this model for inference only (its DeiTClsHead cannot train
# it); here the DistillationClassifier trains it.
#
# Model: mmpretrain's deit-small-distilled_4xb256_in1k.py (DistilledVisionTransformer: class and distillation tokens,
# DeiTClsHead: one linear head each; inference averages the two heads). Distillation (DeiT Sec. 4 and eq. 3; deit
# `--distillation-type hard --distillation-alpha 0.5`, ../_base_/distillation/hard_regnety-16gf.py): the class head
# learns the (mixed, label-smoothed) labels, the distillation head the teacher's argmax, each weighted 0.5; the teacher
# sees the mixed batch. Recipe (DeiT Table 9 and deit main.py's defaults, where mmpretrain's DeiT config differs):
# batch 1024 = 8 x 128, AdamW lr 5e-4 x 1024 / 512 = 1e-3, wd 0.05, cosine to 1e-5 after 5 linear warm-up epochs from
# 1e-6 (mmpretrain's Swin schedule warms up for 20), 300 epochs, drop path 0.1 (deit's --drop-path default; mmpretrain's
# small config has none), no gradient clipping (deit's --clip-grad default None; mmpretrain clips at 5), repeated
# augmentation x3 (deit's RASampler), RandAugment rand-m9-mstd0.5-inc1, random erasing 0.25, mixup 0.8 / cutmix 1.0,
# label smoothing 0.1 (all from mmpretrain's DeiT data and model configs), fp16 AMP (deit's default); test: resize 256 +
# center crop 224, bicubic.
_base_ = ['mmpretrain::deit/deit-small-distilled_4xb256_in1k.py', '../_base_/distillation/hard_regnety-16gf.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    type='DistillationClassifier',
    backbone=dict(drop_path_rate=0.1),
    teacher={{_base_.regnety_16gf_teacher}},
    distillation=dict(mode='hard'),
    alpha=0.5)
train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True))
warmup_epochs = 5
# AMP dtype: fp16 (AmpOptimWrapper's default, dynamic loss scale), as deit trains. bf16: --cfg-options
# optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(_delete_=True, type='AmpOptimWrapper',
                     optimizer=dict(type='AdamW', lr=5e-4 * 1024 / 512, weight_decay=0.05, eps=1e-8,
                                    betas=(0.9, 0.999)),
                     paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
                                        custom_keys={'.cls_token': dict(decay_mult=0.0),
                                                     '.dist_token': dict(decay_mult=0.0),
                                                     '.pos_embed': dict(decay_mult=0.0)}))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / 1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=300)
auto_scale_lr = dict(base_batch_size=1024)
