# Tiny twin of the iLLaMA Mask R-CNN recipe for CPU smoke runs on the embedded synthetic "shapes" data
# (COCO layout with polygon masks). Same detector, neck, LN2d heads and layer-decay optimizer as the COCO config;
# data, size (fixed 128 px batch padding), schedule and lr differ, the 4-conv bbox head is narrow (most of the CPU
# time at this size), and it runs without AMP (plain OptimWrapper: AMP needs a GPU). It trains from scratch, so the
# layer decay is mild. 36 epochs (see the schedule block of
# ../_base_/datasets/shapes_coco.py); bbox mAP 0.249 on the v3 draw of tests/test_twin_transfer.py.
_base_ = ['./mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py', '../_base_/datasets/shapes_coco.py']

data_root = {{_base_.shapes_det_data_root}}
width = 64  # the FPN / RoI width; = shapes_det_width (the shared RPN head's)

model = dict(
    data_preprocessor=dict(batch_augments=[dict(type='BatchFixedSizePad', size=(128, 128), pad_mask=True)]),
    backbone=dict(arch=dict(_delete_=True, embed_dims=width, num_layers=4, num_heads=2), img_size=128,
                  drop_path_rate=0.0, init_cfg=None),
    neck=dict(in_channels=width, out_channels=width),
    rpn_head={{_base_.shapes_det_rpn_head}},
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=width),
        bbox_head=dict(in_channels=width, conv_out_channels=width // 2, fc_out_channels=128,
                       num_classes={{_base_.shapes_det_num_classes}}),
        mask_roi_extractor=dict(out_channels=width),
        mask_head=dict(in_channels=width, conv_out_channels=width, num_classes={{_base_.shapes_det_num_classes}})),
    train_cfg={{_base_.shapes_det_model_train_cfg}},
    test_cfg={{_base_.shapes_det_model_test_cfg}})

# Data: ../_base_/datasets/shapes_coco.py (shared by every family's detection twin).
train_pipeline = {{_base_.shapes_det_train_pipeline}}
test_pipeline = {{_base_.shapes_det_test_pipeline}}
train_dataloader = {{_base_.shapes_det_train_dataloader}}
val_dataloader = {{_base_.shapes_det_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_det_val_evaluator}}
test_evaluator = val_evaluator

max_epochs = {{_base_.shapes_det_max_epochs}}  # replaces the full config's value (read by no component)
train_cfg = {{_base_.shapes_det_epochs_train_cfg}}  # exact resume, validation at the end
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(lr=2e-3, weight_decay=0.05),
                     paramwise_cfg=dict(layer_decay_rate=0.9))
param_scheduler = {{_base_.shapes_det_epochs_param_scheduler}}
auto_scale_lr = dict(base_batch_size=4)
default_hooks = {{_base_.shapes_det_epochs_default_hooks}}
randomness = dict(seed=0)
