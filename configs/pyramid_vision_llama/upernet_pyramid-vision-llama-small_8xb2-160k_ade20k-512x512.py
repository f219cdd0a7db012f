# UperNet with the ImageNet-1K-supervised Pyramid VisionLLaMA-S on ADE20K (paper Sec. 4.3; Table 4(a) reports B and
# L only; official config twins_svt_lama_as-s_uperhead_8xb2-160k_ade20k-512x512.py). It inherits
# mmseg's Twins-SVT-S UperNet recipe, which the official config also inherits: UperHead on the four stages, FCN
# auxiliary head on stage 3, 150 classes, AdamW lr 6e-5, wd 0.01 (none on norms; biases and LayerScale are
# decayed, as in the official runs), 1500-iteration linear warm-up then poly to 160k, 8 GPUs x 2 images.
# Differences to the inherited Twins file, all from the official config: the backbone, AMP, slide test 512/341.
#
# Backbone: the official dense fine-tuning. A new LayerNorm after every stage (norm_after_stage), the released
# GSA key positions, unmasked LSA padding and auto-scale on: AS2DRoPE with one anchor of 14 tokens for every
# stage and one scale from the height (isotropic), on GSA only (GSAttention.forward's base_size=14 of the official
# twins_llama.py). Drop path 0.2 (paper D.7 and the official S/B configs). Pretrained: the deit checkpoint converted
# with tools/model_converters/pyramid_visionllama2mmcausal.py (or our own ImageNet run); override with
# --cfg-options model.backbone.init_cfg.checkpoint=PATH.
_base_ = ['mmseg::twins/twins_svt-s_uperhead_8xb2-160k_ade20k-512x512.py',
          '../_base_/models/pyramid_vision_llama_dense.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

# Backbone: ../_base_/models/pyramid_vision_llama_dense.py.
model = dict(
    backbone={{_base_.pvl_small_dense_backbone}},
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))

# AMP dtype: fp16 (dynamic loss scale), as the official runs (mmseg's fp16 AMP).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(type='AmpOptimWrapper')  # the official runs used AMP (needs a GPU)
# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeIterBasedTrainLoop')
# --auto-scale-lr scales the learning rate from the 8 x 2 images of this recipe to the batch actually used
auto_scale_lr = dict(enable=False, base_batch_size=16)
