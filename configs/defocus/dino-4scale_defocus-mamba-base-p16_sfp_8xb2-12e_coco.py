# DINO-4scale with De-focus Mamba-B and a ViTDet-style simple feature pyramid on COCO, 12 epochs: the released
# detection/configs/dino/defocus_mamba_base_12ep.py + mamba_training_recipe.py. Official README result
# (released numbers, not measured by us: we have trained no full-size detector): 50.2 box AP (AP50 68.2, AP75 54.5);
# 36 epochs: dino-4scale_defocus-mamba-base-p16_sfp_8xb2-36e_coco.py.
# - detector: mmdet's "improved" DINO-4scale (the one the official `_base_/models/dino-4scale_r50_8xb2-12e_coco.py`
#   copies): 900 queries, two-stage, box refinement, 6 + 6 layers, FFN 2048, 4 levels, focal 2.0 / L1 5.0 / GIoU 2.0,
#   denoising with 300 dynamic queries, data preprocessor without padding to a divisor, so it is inherited whole.
# - backbone: De-focus Mamba-B from an ImageNet checkpoint (224 px), fp32, final LayerNorm eps 1e-5 (the official
#   detection backbone's nn.LayerNorm default; classification used 1e-6), drop path linear 0 -> 0.5 over the blocks
#   (fixed: detection has no drop-path schedule), the stride-16 map without the class token.
# - resolution transfer as released: patch rearrangement (the image is padded to whole 224 px sections, visited
#   section by section in raster order, raster inside a section) and the fixed factors delta_scale_factor 4.57
#   (~ r = 1024 / 224) and rope_scale_factor 20.0 (~ r^2). They were fixed for a nominal 1024 x 1024 input; COCO
#   images are about 800 x 1333 and vary. `'auto'` for both derives r^2 from each batch's patch count against the
#   224 px grid instead (not what the released weights were trained with):
#       model.backbone.delta_scale_factor=auto model.backbone.rope_scale_factor=auto
# - neck: P2-P5 (strides 4-32, not the R50 DINO's 8-64) from the stride-16 map, 1x1 + 3x3 convs with LN2d, 256
#   channels, no extra level (num_outs 4 = DINO's num_feature_levels). LN2d eps 1e-5, not ViTDet's 1e-6: the
#   released neck builds its LN2d through mmcv, which sets eps 1e-5 when the norm config gives none.
# - data: mmdet's DETR multi-scale augmentation (shorter side 480-800 step 32, max 1333, or resize 400/500/600 ->
#   random crop 384-600 -> the same multi-scale), flip 0.5; test (1333, 800); 8 GPUs x 2 images (inherited, the same
#   pipeline as mamba_training_recipe.py).
# - optimizer: AdamW lr 2e-4, wd 1e-4 on every parameter (no norm / bias exemption, so A_log, D and the RoPE
#   frequencies decay too, as released), clip 0.1, lr x 0.1 for backbone, sampling_offsets and reference_points
#   (no layer-wise decay), fp32 OptimWrapper; lr x 0.1 after epoch 11 (all inherited from the improved DINO base).
#   `reference_points` is Deformable DETR's single-stage layer: no parameter of the two-stage DINO matches it, so
#   only the backbone and the sampling offsets get x 0.1, in the released run as here.
# Where paper and code differ: the paper gives no detection recipe; this follows the released code. Deliberate
# differences: our selective scan replaces mamba_ssm (the same math; mamba_ssm's kernel is used on CUDA when it is
# installed) and RoPE angles are fp32 (the official detection backbone also runs fp32, so nothing changes).
#
# Initialisation: convert the official ImageNet checkpoint, then train:
#   python tools/model_converters/defocus2mmcausal.py defocus_mamba_base_cls.pth checkpoints/defocus-mamba-base_in1k.pth
# (the official detection flow converted the `model` weights, not the EMA). A released detector checkpoint (whole
# mmdet detector or flat backbone) converts with the same command; its neck and DINO weights are kept. To fine-tune
# the released detector, set `load_from` to it (the missing ImageNet file above is then skipped; README).
_base_ = ['mmdet::dino/dino-4scale_r50_improved_8xb2-12e_coco.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

pretrained = 'checkpoints/defocus-mamba-base_in1k.pth'  # the converted ImageNet checkpoint (command above)
model = dict(
    backbone=dict(
        _delete_=True,
        type='DefocusMamba',
        arch='base',
        img_size=224,  # the pre-training size: the section size of the rearrangement and the reference of 'auto'
        patch_size=16,
        patch_rearrange=True,
        delta_scale_factor=4.57,  # or 'auto'
        rope_scale_factor=20.0,  # or 'auto'
        final_norm_cfg=dict(type='LN', eps=1e-5),
        out_type='featmap',
        drop_path_rate=0.5,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(
        _delete_=True,
        type='SimpleFeaturePyramid',
        in_channels=768,
        out_channels=256,
        scales=(4, 2, 1, 0.5),
        num_outs=4,
        norm_eps=1e-5))  # the released neck's LN2d eps (mmcv's default for a norm config without eps)

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop')
