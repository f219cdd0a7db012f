# UperNet with CaiT-S24 on ADE20K: OUR recipe. The CaiT paper has no segmentation result and no official dense code
# exists; the model's dense use is ours (docs/models.md) and the optimisation follows this repository's VisionLLaMA
# UperNet recipe (configs/vision_llama/upernet_vision-llama-base-p16_8xb2-160k_ade20k-512x512.py, the VisionLLaMA
# paper's D.6 = mmseg's BEiT / MAE ViT recipe). Nobody has trained this config.
#
# Model:
# - backbone: CaiT-S24 at 512 px (32x32 patches; the converter below resizes the 14x14 table to 32x32, bicubic,
#   as deit's --finetune; a checkpoint with another grid is resized on load, and inputs of other sizes at run time),
#   out_type='featmap' on the patch tokens of SA blocks 5 / 11 / 17 / 23 (evenly spaced for 24 blocks, as
#   ViT-B's 2/5/8/11). Dense use needs only the SA stage: the class-attention stage never changes the patch
#   tokens, so class_attn, cls_token and the final norm are not built. feature_norm='none': the final `norm` only
#   ever saw the class token in training (official cait_models.py keeps only token 0), and the neck has its own norms.
#   drop path 0.1 = S24's Table 4 rate, uniform (also mmseg's DeiT-S UperNet rate).
# - neck: mmseg Feature2Pyramid, rescales 4 / 2 / 1 / 0.5 (strides 4 / 8 / 16 / 32 from the stride-16 maps), as the
#   BEiT / MAE recipes of mmseg.
# - heads (inherited from mmseg's MAE ViT-B UperNet): UPerHead (pool scales 1/2/3/6, SyncBN) on [384] x 4 with 512
#   channels (mmseg's DeiT-S UperNet width; the MAE-B base uses its embed width 768) + FCN auxiliary head on the
#   block-17 map (256 channels, loss weight 0.4).
# - pretrained: the converted ImageNet S24_224.pth (released, distilled 83.5 top-1):
#   `python tools/model_converters/cait2mmcausal.py S24_224.pth checkpoints/cait-s24_in1k-dense.pth --config <this>`
#   (keys under `backbone.`; the config makes it a dense conversion: the CA stage, norm and head are dropped).
#
# Optimiser (the VisionLLaMA UperNet recipe, ours here): AdamW lr 6e-5, betas (0.9, 0.999), wd 0.05, no decay on
# 1-D parameters (norms, biases, LayerScale gammas) nor on pos_embed (CaiT's own no-decay rule), fp16 AMP
# (AmpOptimWrapper, dynamic loss scale), batch 16 = 8 GPUs x 2, 1500 linear warm-up iterations from 1e-6 then poly
# (power 1) to 0 at 160k. Layer-wise lr decay through mmcausal's LayerDecayOptimWrapperConstructor (the backbone's
# get_layer_depth: patch_embed / pos_embed id 0, SA block i id i + 1, neck and heads x 1) at rate 0.95, NOT
# VisionLLaMA's 0.65: that rate is for 12 blocks, and over CaiT-S24's 26 ids it would leave block 0 at 0.65**24 = 3e-5
# of the lr; 0.95 is mmseg's rate for its 24-block plain ViT (BEiT-L UperNet). Test: slide 512 / stride 341.
_base_ = ['mmseg::mae/mae-base_upernet_8xb2-amp-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

crop_size = (512, 512)
pretrained = 'checkpoints/cait-s24_in1k-dense.pth'
width = 384
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='CaiT',
        arch='s24',
        img_size=512,
        out_indices=(5, 11, 17, 23),
        out_type='featmap',
        feature_norm='none',
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(type='Feature2Pyramid', embed_dim=width, rescales=[4, 2, 1, 0.5]),
    decode_head=dict(in_channels=[width] * 4, channels=512),
    auxiliary_head=dict(in_channels=width),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(341, 341)))

# AMP dtype: fp16 (dynamic loss scale), as the VisionLLaMA UperNet recipe this one follows.
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # dynamic loss scaling by default
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=6e-5, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(layer_decay_rate=0.95, flat_decay_mult=0., custom_keys={'.pos_embed': dict(decay_mult=0.)}))
fp16 = None  # the MAE base's inert mmcv-1.x AMP switch; AMP comes from AmpOptimWrapper above

max_iters = 160000
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=max_iters, by_epoch=False),
]
train_dataloader = dict(batch_size=2)  # x 8 GPUs = 16
auto_scale_lr = dict(enable=False, base_batch_size=16)

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop', max_iters=max_iters)
