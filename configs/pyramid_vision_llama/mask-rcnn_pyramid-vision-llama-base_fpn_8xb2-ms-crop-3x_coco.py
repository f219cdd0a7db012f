# Mask R-CNN with Pyramid VisionLLaMA-B on COCO, 3x schedule + multi-scale crop (paper Table 5: 49.1 box AP,
# 43.8 mask AP; Twins-SVT-B 48.0 / 43.0; the paper's 76.3M parameters are Twins-SVT-B's, this model has
# 75,535,728 with 80 classes; official config mask-rcnn_twins-b-p4-w7_fpn_ms-crop-
# 3x_coco.py; paper D.8). Inherits mmdet's Swin-T 3x + MS-crop recipe, which is that recipe: DETR-style
# augmentation (flip, then either a short side in 480..800 / long side <= 1333, or resize to 400/500/600, an
# absolute-range crop of 384-600 and the multi-scale resize), AdamW lr 1e-4, wd 0.05 (none on norms), 1000-iteration
# linear warm-up (0.001), steps x0.1 at epochs 27 and 33, 36 epochs, 8 GPUs x 2 images; plus AMP as the official
# runs. Standard R50-FPN Mask R-CNN heads, FPN on the four stages.
#
# Backbone: the official dense fine-tuning (norm after every stage, released GSA key positions, unmasked LSA
# padding, AS2DRoPE anchored at 14 tokens for every stage, isotropic), drop path 0.2. Pretrained: the converted
# deit checkpoint (tools/model_converters/pyramid_visionllama2mmcausal.py).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_ms-crop-3x_coco.py',
          '../_base_/models/pyramid_vision_llama_dense.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

# Backbone and neck: ../_base_/models/pyramid_vision_llama_dense.py (override the checkpoint with
# --cfg-options model.backbone.init_cfg.checkpoint=PATH).
model = dict(backbone={{_base_.pvl_base_dense_backbone}}, neck={{_base_.pvl_base_dense_neck}})
# AMP dtype: fp16 (dynamic loss scale), as the official runs (mmdet's Swin AMP recipe); RoIAlign and NMS run in fp32
# under bf16 (mmcausal/compat/bf16_ops.py). bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md,
# GPU hosts).
optim_wrapper = dict(type='AmpOptimWrapper')
