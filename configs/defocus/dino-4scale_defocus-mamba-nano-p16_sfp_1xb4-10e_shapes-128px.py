# Tiny twin of the De-focus Mamba DINO recipe (dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py) for CPU runs
# on the embedded synthetic "shapes" data (COCO layout, 128 px images, 64 for training; shared data blocks of
# ../_base_/datasets/shapes_coco.py). It keeps the model types and the code paths: De-focus Mamba with the patch
# rearrangement (img_size 64: a 128 px image is 2 x 2 sections of 4 x 4 patches), the simple feature pyramid, DINO
# (two-stage, box refinement, denoising, 4 feature levels), AdamW with the recipe's lr x 0.1 keys, gradient
# clipping and the step schedule. Changed: sizes, data, from-scratch training (no pretrained backbone), the
# schedule and lr, clipping at 1.0 (0.1 of the recipe is for fine-tuning a pretrained model), the scale factors are
# 'auto' (r^2 = 4 at 128 px), and no AMP (the recipe has none either).
# - Transformer width 256: mmdet 3.3's DINO decoder works only at 256 (DinoTransformerDecoder encodes the reference
#   points with a fixed 128 features per coordinate for a ref_point_head of 2 x embed_dims inputs), so the twin is
#   shallow instead: 1 encoder and 2 decoder layers, FFN 256, 2 sampling points, 50 queries.
# - Pyramid levels: strides 8, 16, 32 from the stride-16 map and a stride-64 level pooled from the last (the neck's
#   extra-level path; the stride of the R50 DINO), not the recipe's stride 4-32: at 128 px the stride-4 level is
#   1024 of the 1360 tokens per image and made a step three times slower. Still 4 levels.
# 161-165 s on 2 CPU cores shared with other jobs; box AP 40.5 on shapes v2 (seed 0), 49.5 on v1 (README).
_base_ = ['./dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py', '../_base_/datasets/shapes_coco.py']

data_root = {{_base_.shapes_det_data_root}}
width = 64  # backbone width
dims = 256  # neck / transformer width (see above)

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=width, num_layers=4, dt_rank=4),  # E = 128: two GroupRMS groups
        img_size=64,
        delta_scale_factor='auto',
        rope_scale_factor='auto',
        drop_path_rate=0.0,
        init_cfg=None),
    neck=dict(in_channels=width, out_channels=dims, scales=(2, 1, 0.5), num_outs=4),
    num_queries=50,
    encoder=dict(
        num_layers=1,
        layer_cfg=dict(self_attn_cfg=dict(embed_dims=dims, num_heads=4, num_points=2),
                       ffn_cfg=dict(embed_dims=dims, feedforward_channels=256))),
    decoder=dict(
        num_layers=2,
        layer_cfg=dict(self_attn_cfg=dict(embed_dims=dims, num_heads=4),
                       cross_attn_cfg=dict(embed_dims=dims, num_heads=4, num_points=2),
                       ffn_cfg=dict(embed_dims=dims, feedforward_channels=256))),
    bbox_head=dict(num_classes={{_base_.shapes_det_num_classes}}),
    dn_cfg=dict(group_cfg=dict(num_dn_queries=50)),
    test_cfg=dict(max_per_img=100))

# Data: ../_base_/datasets/shapes_coco.py (shared by every family's detection twin).
train_pipeline = {{_base_.shapes_det_train_pipeline}}
test_pipeline = {{_base_.shapes_det_test_pipeline}}
train_dataloader = {{_base_.shapes_det_train_dataloader}}
val_dataloader = {{_base_.shapes_det_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_det_val_evaluator}}
test_evaluator = val_evaluator

# 10 epochs of 64 images at 4 per step = 160 iterations (the other detection twins: 36); lr x 0.1 after epoch 8.
max_epochs = 10
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)  # exact resume (the full config's loop)
optim_wrapper = dict(optimizer=dict(lr=1e-3), clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[8], gamma=0.1),
]
auto_scale_lr = dict(base_batch_size=4)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0)
