# UperNet with the MAE-pretrained plain VisionLLaMA-B on ADE20K (paper Sec. 4.3, Table 4(b), appendix D.6;
# official recipe: mmseg/configs/mae/lama-base_upernet_8xb2-800-amp-160k_ade20k-512x512.py). It inherits mmseg's MAE
# ViT-B UperNet recipe (Feature2Pyramid neck with rescales 4/2/1/0.5, UPerHead, FCN auxiliary head, 512x512 ADE20K
# pipeline, slide test 512/341) and swaps in the backbone, the layer-decay optimizer constructor and the paper's
# learning rate.
#
# Backbone: `layout='official_mae'` is the weight layout of the released MAE checkpoints (SwiGLU 8192 wide
# with biases, drop path on the attention branch only). `rope_mode='2d'` (integer positions on the 32x32
# grid) is what the official segmentation code ran. The paper's AS2DRoPE alternative is
# `rope_mode='as2d', rope_anchor=14` (positions rescaled onto the 14x14 pre-training grid).
#
# Pretrained weights: `pretrained` below is a placeholder. Produce it from the official MAE checkpoint
# (mmengine `epoch_800.pth`, keys `backbone.*`) with `tools/model_converters/visionllama2mmcausal.py`, or
# use the checkpoint of our own MAE pre-training (`mmcausal.models.vision_llama.mae`), which already has this layout.
#
# Optimizer: AdamW, betas (0.9, 0.999), wd 0.05, lr 6e-5 as in the paper (D.6). The official code used
# lr 1e-4. Layer-wise lr decay 0.65 (official code; the paper does not give it) through mmcausal's
# `LayerDecayOptimWrapperConstructor`: patch_embed x 0.65**13, layers.i x 0.65**(12-i), neck/heads x 1.
# mmseg's `LayerDecayOptimizerConstructor` does not know VisionLLaMA's parameter names, so it is replaced.
# No weight decay on 1-D parameters (norms, biases).
# Schedule: 1500-iteration linear warmup from 1e-6, then poly (power 1) to 0 at 160k; 8 GPUs x 2 images.
# AMP: mmseg's base sets `fp16 = dict(loss_scale='dynamic')`, an mmcv-1.x key that mmengine ignores, and
# an `OptimWrapper`; the official runs used AMP, so `AmpOptimWrapper` is set here explicitly (needs a GPU).
_base_ = ['mmseg::mae/mae-base_upernet_8xb2-amp-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

# Converted MAE checkpoint (see above); the `backbone.` prefix is stripped on load.
pretrained = 'checkpoints/vision-llama-base-p16_mae-800e_in1k.pth'
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='VisionLLaMA',
        arch='base',
        img_size=512,
        patch_size=16,
        layout='official_mae',
        with_cls_token=False,
        mask_mode='bidirectional',  # the paper's (D.6); 'causal' for a causal segmenter (README: Mask modes)
        rope_mode='2d',  # paper's AS2DRoPE: rope_mode='as2d' (it then uses rope_anchor)
        rope_anchor=14,  # the 224 px / patch 16 pre-training grid (not the 32x32 input grid)
        out_indices=[3, 5, 7, 11],
        out_type='featmap',
        final_norm=False,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')))

# AMP dtype: fp16 (dynamic loss scale), as the official runs (mmseg's fp16 AMP).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # dynamic loss scaling by default
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(layer_decay_rate=0.65, flat_decay_mult=0.))
fp16 = None  # the base's inert mmcv-1.x AMP switch; AMP comes from AmpOptimWrapper above

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False),
]

# 8 GPUs x 2 images = global batch 16 (paper D.6).
train_dataloader = dict(batch_size=2)
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop')
