# Tiny twin of the iLLaMA Mask R-CNN recipe for CPU smoke runs on the embedded synthetic "shapes" data
# (COCO layout with polygon masks). Same detector, neck, LN2d heads and layer-decay optimizer as the COCO config;
# data, size (fixed 128 px batch padding), schedule and lr differ, the 4-conv bbox head is narrow (most of the CPU
# time at this size), and it runs without AMP (plain OptimWrapper: AMP needs a GPU). It trains from scratch, so the
# layer decay is mild. About a minute and a half on 2 CPU cores.
_base_ = ['./mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py', '../_base_/datasets/shapes_coco.py']

data_root = {{_base_.shapes_det_data_root}}
width = 64

model = dict(
    data_preprocessor=dict(batch_augments=[dict(type='BatchFixedSizePad', size=(128, 128), pad_mask=True)]),
    backbone=dict(arch=dict(_delete_=True, embed_dims=width, num_layers=4, num_heads=2), img_size=128,
                  drop_path_rate=0.0, init_cfg=None),
    neck=dict(in_channels=width, out_channels=width),
    rpn_head=dict(in_channels=width, feat_channels=width, anchor_generator=dict(scales=[4])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=width),
        bbox_head=dict(in_channels=width, conv_out_channels=width // 2, fc_out_channels=128,
                       num_classes={{_base_.shapes_det_num_classes}}),
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
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(lr=2e-3, weight_decay=0.05),
                     paramwise_cfg=dict(layer_decay_rate=0.9))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[10], gamma=0.1),
]
auto_scale_lr = dict(base_batch_size=4)
default_hooks = dict(logger=dict(interval=10), checkpoint=dict(interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0)
