# Tiny twin of the VisionLLaMA MAE pre-training recipe for CPU smoke runs on the embedded synthetic
# "shapes" data (ImageNet layout; generate it with `python tools/dataset_converters/make_shapes_datasets.py`).
# Same algorithm as mae_vision-llama-base-p16_8xb512-amp-coslr-800e_in1k.py (MAEVisionLLaMA encoder with
# layout 'official_mae', mask ratio 0.75, stock MAE decoder, norm_pix MSE loss, AdamW betas (0.9, 0.95),
# warm-up + cosine); only the sizes, data and schedule differ. 64-px images with patch 8 give an 8x8 grid
# (64 patches, 16 kept). No AMP (CPU). Runs in about a minute on 2 CPU cores.
_base_ = ['./mae_vision-llama-base-p16_8xb512-amp-coslr-800e_in1k.py', '../_base_/datasets/shapes_imagenet.py']

data_root = {{_base_.shapes_mae_data_root}}
img_size = 64
patch_size = 8
num_patches = (img_size // patch_size)**2

model = dict(
    backbone=dict(
        # official_mae layout (SwiGLU with biases, attention-only drop path), but the SwiGLU is narrowed
        # from the layout's 8/3 * 4D = 768 to 256 to keep the CPU run short.
        arch=dict(_delete_=True, embed_dims=64, num_layers=4, num_heads=4, ffn_hidden_dims=256),
        img_size=img_size,
        patch_size=patch_size,
        rope_anchor=img_size // patch_size),  # the twins pre-train here: anchor = this 8x8 grid
    neck=dict(
        num_patches=num_patches,
        patch_size=patch_size,
        embed_dim=64,
        decoder_embed_dim=64,
        decoder_depth=2,
        decoder_num_heads=4),
    head=dict(patch_size=patch_size))

# Data: ../_base_/datasets/shapes_imagenet.py (64 px crops, unlabelled; shared with future MAE twins).
train_pipeline = {{_base_.shapes_mae_train_pipeline}}
train_dataloader = {{_base_.shapes_mae_train_dataloader}}

max_epochs = 20
warmup_epochs = 2
optim_wrapper = dict(
    _delete_=True,  # plain OptimWrapper: no AMP (loss_scale) on CPU
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.95), weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        custom_keys={
            'ln': dict(decay_mult=0.0),
            'bias': dict(decay_mult=0.0),
            'pos_embed': dict(decay_mult=0.),
            'mask_token': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, begin=0, end=warmup_epochs,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=max_epochs - warmup_epochs, eta_min=1e-5, by_epoch=True,
         begin=warmup_epochs, end=max_epochs, convert_to_iter_based=True),
]
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop', max_epochs=max_epochs)
auto_scale_lr = dict(base_batch_size=32)

default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False)
resume = False  # the full recipe auto-resumes; a smoke run starts fresh
