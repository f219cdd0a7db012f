# ViTDet-style Mask R-CNN with the MAE-pretrained plain VisionLLaMA-B on COCO (paper Sec. 4.4, appendix D.9;
# official recipe: `projects/ViTDet/configs/lamadet_mask-rcnn_vit-b-mae_lsj-800-36e.py`).
#
# Backbone (official `LLaMADET`): 1024x1024 input, patch 16, so a 64x64 token grid. Blocks 2, 5, 8 and 11 use global
# attention, and the others use 14x14 windows (the grid is zero-padded to 70x70, 5x5 windows). Windowed blocks use
# window-local RoPE positions 0..13 (the MAE pre-training grid); global blocks use the 64x64 integer grid
# (`rope_mode='2d'`, no AS2DRoPE, as the official code ran). The zero padding of the overhanging windows is masked
# out of the keys (`mask_window_padding=True`, the default); the official code attends to it, which
# `mask_window_padding=False` reproduces (only needed to match official fine-tuned ViTDet weights; none were
# released). Only the last block is used (`out_indices=[11]`) and there is no final norm.
# The stride-16 map feeds mmcausal's `SimpleFeaturePyramid` (strides 4/8/16/32 + P6, 256 channels, LN2d).
# `pretrained` is a placeholder: convert the official MAE checkpoint with
# `tools/model_converters/visionllama2mmcausal.py` or use our MAE pre-training (see the UperNet config).
#
# Heads as in ViTDet: RPN with 2 convs, `Shared4Conv1FCBBoxHead`, and a mask head, with LayerNorm2d in the conv
# heads, eps 1e-6 as ViTDet's own `LayerNorm` (Li et al., detectron2); the neck's LN2d uses 1e-6 and its convs
# ViTDet's init (kaiming normal, fan_out) by default (`SimpleFeaturePyramid`). WHERE THIS DIFFERS FROM THE OFFICIAL
# CODE: the official detector is mmdet's ViTDet project, whose `norm_cfg=dict(type='LN2d')` without eps goes through
# mmcv's `build_norm_layer`, which sets eps 1e-5 (neck and heads). No official detector weights were released, so
# this follows ViTDet's 1e-6; `head_norm_cfg.eps=1e-5` and `model.neck.norm_eps=1e-5` give the official code's.
# mmpretrain registers LayerNorm2d as 'LN2d'; the mmdet scope does not have it, so it is named with its scope
# (`mmpretrain.LN2d`, resolved by mmengine's cross-scope lookup; tested under mmdet's own tools/train.py).
#
# Optimizer (paper D.9): AdamW lr 1e-4, betas (0.9, 0.999), wd 0.1, layer-wise lr decay 0.7 through mmcausal's
# `LayerDecayOptimWrapperConstructor` (patch_embed x 0.7**13, layers.i x 0.7**(12-i), neck/heads x 1), and no wd on
# 1-D parameters (norms, biases). Global batch 64 = 16 GPUs x 4 images. The official run used 8 GPUs x 4 with
# `accumulative_counts=2`; to do the same, set `optim_wrapper.accumulative_counts=2` on 8 GPUs. AMP as in the
# official code. The official DDP fp16 gradient compression hook lives in mmdet's ViTDet project and is not used.
#
# Schedule: 36 epochs expressed in iterations. COCO train2017 has 118,287 images, so one epoch at 64 images per
# step is 118287 / 64 = 1848.2 iterations (the 1,021 images without annotations that mmdet drops are counted, as
# Detectron2 and ViTDet do).
#   36 epochs: 36 * 118287 / 64 = 66,536 iterations
#   27 and 33 epochs (lr x 0.1): 49,902 and 60,992
#   1000-iteration linear warmup from factor 0.001
# Data: mmdet's LSJ pipeline (scale 0.1-2.0, 1024 crop) with a fixed 1024x1024 batch pad (ViTDet). The test
# images are resized to 1024 (aspect kept) and padded to 1024, as in the official code.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::common/lsj-100e_coco-instance.py',
    '../_base_/datasets/vitdet_test_1024.py',
]
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

image_size = (1024, 1024)
head_norm_cfg = dict(type='mmpretrain.LN2d', eps=1e-6, requires_grad=True)
pretrained = 'checkpoints/vision-llama-base-p16_mae-800e_in1k.pth'  # converted MAE checkpoint (see above)
model = dict(
    data_preprocessor=dict(
        pad_size_divisor=32, batch_augments=[dict(type='BatchFixedSizePad', size=image_size, pad_mask=True)]),
    backbone=dict(
        _delete_=True,
        type='VisionLLaMA',
        arch='base',
        img_size=1024,
        patch_size=16,
        layout='official_mae',
        with_cls_token=False,
        mask_mode='bidirectional',  # the paper's (D.9); 'causal' also holds in the windows (README: Mask modes)
        rope_mode='2d',
        rope_anchor=14,  # used only with rope_mode='as2d': the 224 px / patch 16 pre-training grid
        window_size=14,
        global_blocks=[2, 5, 8, 11],
        mask_window_padding=True,
        out_indices=[11],
        out_type='featmap',
        final_norm=False,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(
        _delete_=True,
        type='SimpleFeaturePyramid',
        in_channels=768,
        out_channels=256,
        scales=(4, 2, 1, 0.5),
        num_outs=5),
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=head_norm_cfg)))

# 36 epochs in iterations (see the arithmetic above).
max_iters = 66536
interval = 5000
# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeIterBasedTrainLoop', max_iters=max_iters, val_interval=interval)
train_dataloader = dict(
    batch_size=4,  # x 16 GPUs = 64
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(times=1))  # the base's RepeatDataset only matters for epoch-based loops
test_pipeline = {{_base_.vitdet_test_pipeline}}  # ../_base_/datasets/vitdet_test_1024.py
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

# AMP dtype: fp16 (dynamic loss scale), as the official code; RoIAlign and NMS run in fp32 under bf16
# (mmcausal/compat/bf16_ops.py).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # dynamic loss scaling by default
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(layer_decay_rate=0.7, flat_decay_mult=0.))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=max_iters, by_epoch=False, milestones=[49902, 60992], gamma=0.1),
]

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=interval, max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
auto_scale_lr = dict(enable=False, base_batch_size=64)
