# Pyramid VisionLLaMA-B supervised on ImageNet-1K (VisionLLaMA paper Table 2: 83.2 % top-1, 56M parameters;
# the official deit recipe, deit/train_p_300.sh): batch 1024 = 8 GPUs x 128, 300 epochs, AdamW lr 5e-4 * 1024 / 512 =
# 1e-3, wd 0.05 (none on norms, biases, LayerScale: every 1-D parameter, as timm), 5 linear warm-up epochs then
# cosine to 1e-5, label smoothing 0.1, mixup 0.8, cutmix 1.0, RandAugment m9-mstd0.5, random erasing 0.25, no
# repeated augmentation, no EMA, AMP, drop path 0.3 (S 0.2, L 0.5). No gradient clipping (deit's default; the
# inherited mmpretrain Twins config clips at 5). Data pipeline, head and mixup/cutmix come from mmpretrain's
# Twins-SVT-B config, which is the same DeiT recipe.
#
# The backbone reproduces the released weights (converted with tools/model_converters/
# pyramid_visionllama2mmcausal.py, they give the official logits; tests/test_converters/): official GSA key
# positions, unmasked LSA padding, the classifier's double final norm norm(mean(norm(x))). RoPE: 'as2d' with
# per-stage anchors (224 / stride) is exactly the integer 2D RoPE of the official pre-training at 224 px.
_base_ = 'mmpretrain::twins/twins-svt-base_8xb128_in1k.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,  # drop SVT-only keys
        type='PyramidVisionLLaMA',
        arch='base',
        gsa_key_pos='official',  # the released weights' key positions (deit/my_models.py); 'fixed' is correct geometry
        mask_window_padding=False,  # official: padded LSA windows attend to the zero padding (no padding at 224)
        rope_mode='as2d',
        rope_anchor='per_stage',
        out_type='avg_featmap',
        out_indices=-1,
        norm_after_stage=False,
        final_norm=True,
        official_double_norm=True,  # deit/my_models.py: the same LayerNorm again on the pooled vector
        drop_path_rate=0.3),
    neck=None,  # the backbone pools
    head=dict(in_channels=768))

# AMP dtype: fp16 (dynamic loss scale), the official Twins/DeiT code's torch.cuda.amp.
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),
    paramwise_cfg=dict(_delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0),
    clip_grad=None)

# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
train_cfg = dict(_delete_=True, type='ExactResumeEpochBasedTrainLoop', max_epochs=300, val_interval=1)
