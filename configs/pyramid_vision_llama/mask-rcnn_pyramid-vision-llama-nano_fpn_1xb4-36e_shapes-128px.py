# Tiny twin of the Pyramid VisionLLaMA Mask R-CNN recipe (3x + MS crop) for CPU runs on the embedded synthetic
# "shapes" data (COCO layout with polygon masks). Same detector, backbone type with the official dense settings
# (released GSA key positions, unmasked LSA padding, one isotropic AS2DRoPE anchor, norm after every stage), FPN
# on four stages and AdamW; data (fixed 128 px batch padding), sizes, schedule, lr (from scratch: no pretrained
# init), narrow heads and no AMP (needs a GPU) differ. 36 epochs (see
# ../_base_/datasets/shapes_coco.py); bbox mAP 0.252 on the v3 draw of tests/test_twin_transfer.py.
_base_ = ['./mask-rcnn_pyramid-vision-llama-base_fpn_8xb2-ms-crop-3x_coco.py', '../_base_/datasets/shapes_coco.py']

data_root = {{_base_.shapes_det_data_root}}
dims = [16, 32, 32, 64]
width = 64  # the FPN / RoI width; = shapes_det_width (the shared RPN head's)

model = dict(
    data_preprocessor=dict(batch_augments=[dict(type='BatchFixedSizePad', size=(128, 128), pad_mask=True)]),
    backbone=dict(arch=dict(_delete_=True, embed_dims=dims, num_heads=[1, 2, 2, 4], depths=[2, 2, 2, 2]),
                  window_size=4, sr_ratios=(4, 2, 1, 1), drop_path_rate=0.0, init_cfg=None,
                  rope_anchor=8),  # the official single anchor, scaled to the twin: the 128 px grid of stage 3
    neck=dict(in_channels=dims, out_channels=width),
    rpn_head={{_base_.shapes_det_rpn_head}},
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=width),
        bbox_head=dict(in_channels=width, fc_out_channels=128, num_classes={{_base_.shapes_det_num_classes}}),
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
optim_wrapper = dict(type='OptimWrapper', optimizer=dict(lr=2e-3, weight_decay=0.05))
param_scheduler = {{_base_.shapes_det_epochs_param_scheduler}}
auto_scale_lr = dict(base_batch_size=4)
default_hooks = {{_base_.shapes_det_epochs_default_hooks}}
randomness = dict(seed=0)
