# CaiT-S24 on ImageNet-1K at 224 px from scratch: the paper's recipe (Touvron et al., "Going deeper with Image
# Transformers", ICCV 2021, Sec. 4.3 and Table 4; the deit maintainers' answers where the paper is silent). The shared
# base of every CaiT config in this folder: the others inherit it and change only what differs.
#
# Paper numbers for this model (Table 3): 82.7 top-1 trained as here, 83.5 with distillation (S-24Υ). ALL released
# checkpoints are the hard-distilled (Υ) models (DeiT hard distillation on the single class head, RegNetY-16GF teacher;
# the official README and paper App. B). This config trains WITHOUT distillation (mmpretrain has no DeiT
# hard-distillation loss for a single-head model), so a run of it targets the paper's non-distilled 82.7; the converted
# S24_224.pth gives 83.5.
#
# Model (the official cait_models.py registrations): arch 's24' = C 384, 24 SA blocks, 8 heads, 2 class-attention
# blocks, LayerScale init 1e-5 (the arch default, = Table 4 and the official code), LN eps 1e-6, qkv bias; 46,916,200
# parameters with the 1000-class head. Stochastic depth d_r = 0.1 (Table 4), UNIFORM over the SA blocks and 0 in the CA
# blocks (Sec. 4.1.1; the backbone's drop_path_rate is the constant rate). Head: Linear(384, 1000), trunc-normal(0.02) /
# zero bias as the official init; loss: label smoothing 0.1 (mmpretrain's DeiT configs: LabelSmoothLoss 'original',
# which smooths the mixed targets as timm's Mixup does).
#
# Recipe ("identical to DeiT except mentioned otherwise", Sec. 4.3; the DeiT values are deit main.py's defaults):
# - batch 1024 = 8 GPUs x 128 (Sec. 4.3), 400 epochs (Sec. 4.3 / Table 3), repeated augmentation x3 (Sec. 4.3;
#   deit's RASampler, kept at 3 per the deit maintainers, https://github.com/facebookresearch/deit/issues/104;
#   mmpretrain's RepeatAugSampler).
# - AdamW lr 1e-3 at batch 1024 (Sec. 4.3; = DeiT's 5e-4 per 512, linearly scaled: auto_scale_lr base 1024), betas
#   (0.9, 0.999) and eps 1e-8 (timm defaults), weight decay 0.05 (Sec. 4.3). No weight decay on 1-D parameters
#   (norms, biases, the LayerScale gammas), pos_embed and the class token (deit's timm optimizer factory
#   exempts 1-D parameters and biases, the model's no_weight_decay() adds pos_embed and cls_token; ours are
#   backbone.pos_embed and backbone.class_attn.cls_token). The talking-heads proj_l / proj_w weights (2-D) decay.
# - cosine schedule with 5 linear warm-up epochs (Sec. 4.3); start 1e-6 and floor 1e-5 are deit's --warmup-lr /
#   --min-lr defaults (the paper is silent). deit steps the schedule once per epoch; we step per iteration.
# - fp16 mixed precision with dynamic loss scaling (paper Sec. 4 setup: fp16; AmpOptimWrapper, needs a GPU). No
#   gradient clipping (deit default --clip-grad None). No EMA: deit keeps one by default but evaluates the raw
#   model, and the paper does not use it.
# - data (DeiT, inherited from mmpretrain's imagenet_bs64_swin_224.py, which is DeiT's pipeline): RandomResizedCrop
#   224 bicubic, flip, RandAugment rand-m9-mstd0.5-inc1, random erasing 0.25 (per-pixel random fill), mixup 0.8 /
#   cutmix 1.0 (one per batch), label smoothing 0.1.
# - test: bicubic resize of the short side to 224 and center crop 224 (crop ratio 1.0, Sec. 4.3 / 4.5.3 and the
#   official README), ImageNet mean / std.
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    type='ImageClassifier',
    backbone=dict(type='CaiT', arch='s24', img_size=224, drop_path_rate=0.1, out_type='cls_token'),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=384,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

# Crop ratio 1.0: the short side is resized to the crop size (timm's Resize(int(224 / 1.0)) + CenterCrop(224)).
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=224, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=128, sampler=dict(type='RepeatAugSampler', num_repeats=3, shuffle=True))
val_dataloader = dict(batch_size=128, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

warmup_epochs = 5
# AMP dtype: fp16 (AmpOptimWrapper's default, dynamic loss scale), as the paper trained (Sec. 4: fp16).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        _delete_=True,  # drop the Swin schedule's custom keys
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.pos_embed': dict(decay_mult=0.0),
            '.cls_token': dict(decay_mult=0.0),
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6 / 1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=400, val_interval=1)
auto_scale_lr = dict(base_batch_size=1024)
# mmpretrain's runtime saves every epoch: keep the last two (S24 with its AdamW state is ~0.56 GB per file)
default_hooks = dict(checkpoint=dict(max_keep_ckpts=2))
