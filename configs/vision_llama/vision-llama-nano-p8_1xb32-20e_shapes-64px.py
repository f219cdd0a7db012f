# Tiny twin of the VisionLLaMA fine-tuning recipe (vision-llama-base-p16_8xb128-coslr-100e_in1k.py) for CPU
# smoke runs on the embedded synthetic "shapes" data (ImageNet layout; generate it with
# `python tools/dataset_converters/make_shapes_datasets.py`). Same backbone type and layout ('official_mae',
# no cls token, GAP feature, no final norm), head, AdamW and mmcausal layer-wise lr decay as the full
# recipe; the sizes (the encoder of mae_vision-llama-nano-p8_1xb32-*e_shapes-64px.py), data, augmentation
# (no RandAugment / erasing / mixup / cutmix: 400 images, 4 classes) and schedule differ.
#
# From scratch by default. To fine-tune the tiny MAE encoder instead (keys under `backbone.` of the MAE
# checkpoint; its cls token and final norm are unused here):
#   python tools/train.py configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py --cfg-options \
#       model.backbone.init_cfg._delete_=True model.backbone.init_cfg.type=Pretrained \
#       model.backbone.init_cfg.prefix=backbone. \
#       model.backbone.init_cfg.checkpoint=work_dirs/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px/epoch_20.pth
_base_ = ['./vision-llama-base-p16_8xb128-coslr-100e_in1k.py', '../_base_/datasets/shapes_imagenet.py']

data_root = {{_base_.shapes_cls_data_root}}

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=64, num_layers=4, num_heads=4, ffn_hidden_dims=256),
        img_size=64,
        patch_size=8,
        rope_anchor=8,  # AS2DRoPE anchor: the 64 px / patch 8 grid the twins pre-train on
        drop_path_rate=0.1,
        init_cfg=None),  # the backbone's default init (trunc-normal Linear); see above for the MAE init
    head=dict(num_classes={{_base_.shapes_cls_num_classes}}, in_channels=64,
              init_cfg=[dict(type='TruncNormal', layer='Linear', std=.02)]),
    train_cfg=dict(_delete_=True))
data_preprocessor = dict(num_classes={{_base_.shapes_cls_num_classes}})

# Data: ../_base_/datasets/shapes_imagenet.py (shared by every family's classification twin).
train_pipeline = {{_base_.shapes_cls_train_pipeline}}
test_pipeline = {{_base_.shapes_cls_test_pipeline}}
train_dataloader = {{_base_.shapes_cls_train_dataloader}}
val_dataloader = {{_base_.shapes_cls_val_dataloader}}
test_dataloader = val_dataloader
val_evaluator = {{_base_.shapes_cls_val_evaluator}}
test_evaluator = val_evaluator

max_epochs = 20
warmup_epochs = 2
# lr 4e-3 (twice the full recipe's): from scratch, layer decay 0.45 leaves the 4 blocks 0.45-0.04 of it.
optim_wrapper = dict(optimizer=dict(lr=4e-3), paramwise_cfg=dict(layer_decay_rate=0.45))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs, eta_min=1e-5, by_epoch=True,
         begin=warmup_epochs, end=max_epochs, convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs,
                 val_interval=max_epochs)
auto_scale_lr = dict(base_batch_size=32)

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False)
