# Tiny twin of the Pyramid VisionLLaMA Mask R-CNN recipe (3x + MS crop) for CPU runs on the embedded synthetic
# "shapes" data (COCO layout with polygon masks). Same detector, backbone type with the official dense settings
# (released GSA key positions, unmasked LSA padding, one isotropic AS2DRoPE anchor, norm after every stage), FPN
# on four stages and AdamW; data (fixed 128 px batch padding), sizes, schedule, lr (from scratch: no pretrained
# init), narrow heads and no AMP (needs a GPU) differ. About two minutes on 2 CPU cores.
_base_ = ['./mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-ms-crop-3x_coco.py', '../_base_/datasets/shapes_coco.py']

data_root = {{_base_.shapes_det_data_root}}
dims = [16, 32, 32, 64]
width = 64

model = dict(
    data_preprocessor=dict(batch_augments=[dict(type='BatchFixedSizePad', size=(128, 128), pad_mask=True)]),
    backbone=dict(arch=dict(_delete_=True, embed_dims=dims, num_heads=[1, 2, 2, 4], depths=[2, 2, 2, 2]),
                  window_size=4, sr_ratios=(4, 2, 1, 1), drop_path_rate=0.0, init_cfg=None,
                  rope_anchor=8),  # the official single anchor, scaled to the twin: the 128 px grid of stage 3
    neck=dict(in_channels=dims, out_channels=width),
    rpn_head=dict(in_channels=width, feat_channels=width, anchor_generator=dict(scales=[4])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=width),
        bbox_head=dict(in_channels=width, fc_out_channels=128, num_classes={{_base_.shapes_det_num_classes}}),
        mask_roi_extractor=dict(out_channels=width),
        mask_head=dict(in_channels=width, conv_out_channels=width, num_classes={{_base_.shapes_det_num_classes}})),
    train_cfg=dict(rpn=dict(sampler=dict(num=64)), rpn_proposal=dict(nms_pre=300, max_per_img=100),
                   rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=200, max_per_img=100), rcnn=dict(max_per_img=20)))

# Data: ../_base_/datasets/shapes_coco.py (shared by every family's detection twin).
train_pipeline = {{_base_.shapes_det_train_pipeline}}
test_pipeline = {{_base_.shapes_det_test_pipeline}}
train_dataloader = {{_base_.shapes_det_train_dataloader}}
val_dataloader = {{_base_.shapes_det_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_det_val_evaluator}}
test_evaluator = val_evaluator

max_epochs = 12
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs, val_interval=max_epochs)
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(lr=2e-3, weight_decay=0.05))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[10], gamma=0.1),
]
auto_scale_lr = dict(base_batch_size=4)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0)
