# Tiny twin of the CaiT UperNet recipe (upernet_cait-s24_8xb2-160k_ade20k-512x512.py) for CPU runs on the embedded
# synthetic "shapes" data (ADE20K layout; label 0 = "other" is ignored through reduce_zero_label). It keeps the
# model types (CaiT SA stage with talking heads and LayerScale, patch-token feature maps without the final norm,
# Feature2Pyramid 4 / 2 / 1 / 0.5, UPerHead, FCN auxiliary head), the layer-decay constructor, CaiT's no-decay rules
# and the warm-up + poly schedule. The data, the sizes (C 64, 4 SA blocks, 2 heads, patch 8: strides 2 / 4 / 8 / 16
# after the neck), the schedule and the learning rate differ; it trains from scratch (no pretrained init, so the
# layer decay is mild and LayerScale starts at 0.1, the paper's rule for shallow models) and without AMP (plain
# OptimWrapper: AMP needs a GPU).
_base_ = ['./upernet_cait-s24_8xb2-160k_ade20k-512x512.py', '../_base_/datasets/shapes_ade20k.py']

crop_size = (64, 64)
data_root = {{_base_.shapes_seg_data_root}}
width = 64

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=width, num_layers=4, num_heads=2),
        img_size=crop_size,
        patch_size=8,
        layer_scale_init_value=0.1,
        out_indices=(0, 1, 2, 3),
        drop_path_rate=0.0,
        init_cfg=None),
    neck=dict(embed_dim=width),
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

max_iters = 250
warmup_iters = 20
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(lr=4e-3, weight_decay=0.01),
    paramwise_cfg=dict(layer_decay_rate=0.9))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=warmup_iters),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=warmup_iters, end=max_iters, by_epoch=False),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20, log_metric_by_epoch=False),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=1))
randomness = dict(seed=0)
