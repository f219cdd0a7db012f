# Linear probing of MAE-pre-trained plain VisionLLaMA-Base on ImageNet-1K (VisionLLaMA paper Table 14, the MAE
# recipe; official mmpretrain linear-probe config). Recipe inherited from mmpretrain's MAE ViT
# linear-probe benchmark: LARS, base lr 0.1 per 256 images -> lr = 0.1 * 16384 / 256 = 6.4 at batch
# 16384 = 8 GPUs x 2048, momentum 0.9, wd 0, 10 linear warm-up epochs then cosine to 0, 90 epochs,
# RandomResizedCrop + flip only, AMP.
# The whole backbone is frozen (frozen_stages=12 = all blocks, which also freezes the GAP norm); only the
# parameter-free BatchNorm neck (ClsBatchNormNeck, affine=False) and the linear head are trained.
# Feature: mean of the patch tokens (no cls token, no final norm), as in the official config.
_base_ = 'mmpretrain::mae/benchmarks/vit-base-p16_8xb2048-linear-coslr-90e_in1k.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)
# Our MAE pre-training output or an official MAE checkpoint converted by
# tools/model_converters/visionllama2mmcausal.py; override with
# --cfg-options model.backbone.init_cfg.checkpoint=PATH
pretrained = 'work_dirs/mae_vision-llama-base-p16_8xb512-amp-coslr-800e_in1k/epoch_800.pth'
# AMP dtype: fp16 (the inherited AmpOptimWrapper, dynamic loss scale), as mmpretrain's MAE linear probe.
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).

model = dict(
    backbone=dict(
        _delete_=True,  # drop VisionTransformer-only keys
        type='VisionLLaMA',
        arch='base',
        img_size=224,
        patch_size=16,
        layout='official_mae',  # weight layout of the released MAE weights; must match pre-training
        mask_mode='bidirectional',  # a linear probe reads the frozen features in the mode they were trained in
        rope_mode='as2d',  # = integer 2D RoPE at 224 px, as in pre-training
        rope_anchor=14,  # AS2DRoPE anchor: the 224 px / patch 16 pre-training grid
        as2d_scaling='per_axis',  # ours; paper Eq. 4 and official code: 'isotropic' (one scale from H). Same at
        # square inputs; per_axis generalises better to non-square ones on the tiny twin (README)
        with_cls_token=False,
        out_type='avg_featmap',
        final_norm=False,
        frozen_stages=12,
        # Placeholder: a checkpoint of our MAE pre-training
        # (mae_vision-llama-base-p16_8xb512-amp-coslr-*e_in1k.py) or an official MAE checkpoint converted
        # with tools/model_converters/visionllama2mmcausal.py.
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(type='ClsBatchNormNeck', input_features=768),
    head=dict(type='VisionTransformerClsHead', in_channels=768))

# The inherited auto_scale_lr (base 1024, from the AdamW schedule) does not match lr 6.4 at batch 16384.
auto_scale_lr = dict(base_batch_size=16384)

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=90, val_interval=1)
