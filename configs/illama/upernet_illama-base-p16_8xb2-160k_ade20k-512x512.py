# UperNet with iLLaMA-B on ADE20K (iLLaMA paper Sec. 4.5, Table 10: 45.1 mIoU multi-scale, 163.22M parameters).
# Reproduces the authors' segmentation code (https://github.com/techmonsterwang/iLLaMA/tree/d27201c/segmentation:
# `backbone/doit.py`, `configs/doit/upernet/upernet_doit_base_12_512_slide_160k_ade20k_ms.py`). It inherits
# mmseg's MAE ViT-B UperNet recipe, which is the same model and data recipe (BEiT-style), and swaps in the backbone.
#
# Model (= the official one; the whole segmentor has 163,222,316 parameters = Table 10's 163.22M, and the tiny
# config 10,864,556 = 10.86M; asserted in tests/test_configs.py):
# - backbone: iLLaMA-B at 512 px (32x32 patches + class token last = 1025 tokens), blocks 3/5/7/11 tapped before
#   any norm (the official forward never applies its final norm), drop path 0.1. Initialise from an ImageNet
#   checkpoint converted with `tools/model_converters/illama2mmcausal.py` (the position table is resized from 224
#   to 512 on load).
# - mask_mode='official': the official code multiplies the softmax by the lower-triangular mask with no
#   renormalisation, exactly as in classification (our `official` mode at soft_mask_rate 0). `causal` (strictly
#   causal, SDPA, O(N) memory) is an opt-in that changes the model: `model.backbone.mask_mode=causal`. It leaves
#   the class token without gradient, hence `find_unused_parameters` below (also set by the official config).
#   Memory: `official` keeps O(N) per block (one SDPA over every key twice, no heads x N x N scores); set
#   `model.backbone.with_cp=True` (gradient checkpointing, same gradients) where the GPU is still short of memory.
# - neck: the official backbone's fpn1..fpn4 on the four taps = mmseg's `Feature2Pyramid` with rescales
#   (4, 2, 1, 0.5): ConvT 2x2 + SyncBN + GELU + ConvT 2x2 (stride 4), ConvT 2x2 (stride 8), identity, MaxPool 2.
# - heads (inherited): UPerHead(in [768]x4, channels 768, pool scales 1/2/3/6, SyncBN) + FCN auxiliary head
#   (in_index 2, 256 channels, loss weight 0.4). Table 10's count includes the auxiliary head: without it the
#   model has 161.41M, with MultiLevelNeck/UPerHead(512) (mmseg's ViT recipe) 144.1M.
#
# Optimizer (official config; conflicts with the paper text, which says "learning rate 6e-5, weight decay 0.01" =
# mmseg's ViT recipe; we follow the official config, which produced Table 10):
# AdamW lr 3e-5, betas (0.9, 0.999), wd 0.05, layer-wise lr decay 0.9 over 14 layer ids (patch embed / pos / cls
# x 0.9**13, block i x 0.9**(12 - i), neck and heads x 1) through mmcausal's LayerDecayOptimWrapperConstructor
# (same ids as the official BEiT-style constructor). No wd on 1-D parameters (norms, biases). The official
# constructor's name check for `pos_embed` / `cls_token` misses the `backbone.` prefix, so they ARE decayed in
# the official run; we follow the code (for the intended exemption add
# custom_keys={'pos_embed': dict(decay_mult=0.), 'cls_token': dict(decay_mult=0.)}).
# fp32 (the official config has no fp16). Batch 16 = 8 GPUs x 2.
# Schedule (official mmcv-1.x `poly` with linear warm-up): lr(i) = lr * (1 - i / 160k) * w(i) with
# w(i) = 1 - (1 - i / 1500) * (1 - 1e-6) for i < 1500: LinearLR and PolyLR both from iteration 0 (mmengine
# chains them multiplicatively; mmseg's MAE recipe starts the poly at 1500 instead). mmengine's LinearLR reaches
# its end factor at iteration `end - 1`, so end=1501 is exactly the official 1500-iteration warm-up.
# Test: slide 512 / stride 341 (official). Table 10 is multi-scale + flip: `tta_pipeline` below, run by
# `upernet_illama-base-p16_8xb2-160k_ade20k-512x512_ms-test.py` (or mmseg's tools/test.py --tta).
_base_ = ['mmseg::mae/mae-base_upernet_8xb2-amp-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

crop_size = (512, 512)
pretrained = 'checkpoints/illama-base-p16_in1k.pth'
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='ILLaMA',
        arch='base',
        img_size=512,
        mask_mode='official',
        out_indices=(3, 5, 7, 11),
        out_type='featmap',
        final_norm=False,
        drop_path_rate=0.1,
        with_cp=False,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(type='Feature2Pyramid', embed_dim=768, rescales=[4, 2, 1, 0.5]),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))
find_unused_parameters = True

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=3e-5, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(layer_decay_rate=0.9, flat_decay_mult=0.))
fp16 = None  # the MAE base's inert mmcv-1.x AMP switch; the official run was fp32

max_iters = 160000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1501),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=0, end=max_iters, by_epoch=False),
]
# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop', max_iters=max_iters)
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Multi-scale + flip test as the official `MultiScaleFlipAug` + BEiT's `SETR_Resize(setr_multi_scale=True)`: ratios
# 0.5..1.75 of (2048, 512), but the short side is never below the 512 crop, so 0.5 and 0.75 run at 512 like 1.0
# (512 gets 3 of the 6 scales, as officially). Each scale with and without horizontal flip; SegTTAModel averages
# the softmax of all 12 predictions. One difference: the long side is capped at 4x the short one (mmseg's ADE20K
# convention), which SETR_Resize does not do; it only matters for images wider than 4:1.
img_ratios = [0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
tta_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(
        type='TestTimeAug',
        transforms=[
            [dict(type='Resize', scale=(int(2048 * max(r, 1.)), int(512 * max(r, 1.))), keep_ratio=True)
             for r in img_ratios],
            [dict(type='RandomFlip', prob=0., direction='horizontal'),
             dict(type='RandomFlip', prob=1., direction='horizontal')],
            [dict(type='LoadAnnotations')],
            [dict(type='PackSegInputs')],
        ])
]
tta_model = dict(type='SegTTAModel')
