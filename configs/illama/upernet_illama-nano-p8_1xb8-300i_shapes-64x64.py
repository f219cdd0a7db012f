# Tiny twin of the iLLaMA UperNet recipe for CPU smoke runs on the embedded synthetic "shapes" data
# (ADE20K layout, 0 = "other" -> ignored by reduce_zero_label). Same model type, neck, heads and optimizer
# family as the ADE20K configs; data, size and schedule differ. About a minute on 2 CPU cores.
_base_ = ['./upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512.py', '../_base_/datasets/shapes_ade20k.py']

crop_size = (64, 64)
data_root = {{_base_.shapes_seg_data_root}}
width = 64

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=width, num_layers=4, num_heads=2),
        img_size=crop_size,
        patch_size=8,
        out_indices=(0, 1, 2, 3),
        init_cfg=None),
    neck=dict(embed_dim=width),  # Feature2Pyramid 4/2/1/0.5 as in the full config: strides 2/4/8/16 at patch 8
    decode_head=dict(in_channels=[width] * 4, channels=width, pool_scales=(1, 2, 4),
                     num_classes={{_base_.shapes_seg_num_classes}}),
    auxiliary_head=dict(in_channels=width, channels=width // 2, num_classes={{_base_.shapes_seg_num_classes}}),
    test_cfg=dict(_delete_=True, mode='whole'))

# Data: ../_base_/datasets/shapes_ade20k.py (shared by every family's segmentation twin); the evaluator is the
# full config's IoUMetric.
train_pipeline = {{_base_.shapes_seg_train_pipeline}}
test_pipeline = {{_base_.shapes_seg_test_pipeline}}
train_dataloader = {{_base_.shapes_seg_train_dataloader}}
val_dataloader = {{_base_.shapes_seg_val_dataloader}}
test_dataloader = val_dataloader

max_iters = 300
optim_wrapper = dict(optimizer=dict(lr=2e-3, weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=20),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=20, end=max_iters, by_epoch=False),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1))
randomness = dict(seed=0)
