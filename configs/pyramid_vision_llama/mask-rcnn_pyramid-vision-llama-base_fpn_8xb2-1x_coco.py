# Mask R-CNN with Pyramid VisionLLaMA-B on COCO, 1x schedule: mmdet's Swin-T 1x recipe (single-scale 1333x800
# training, 12 epochs, steps at 8 and 11, AdamW lr 1e-4, wd 0.05, none on norms, 1000-iteration warm-up) with the
# 3x config's backbone, neck (../_base_/models/pyramid_vision_llama_dense.py) and AMP. The paper reports only the
# 3x + MS result (Table 5: 49.1 box AP, 43.8 mask AP).
_base_ = ['mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py', '../_base_/models/pyramid_vision_llama_dense.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(backbone={{_base_.pvl_base_dense_backbone}}, neck={{_base_.pvl_base_dense_neck}})
# AMP dtype: fp16 (dynamic loss scale), as the official runs (mmdet's Swin AMP recipe); RoIAlign and NMS run in fp32
# under bf16 (mmcausal/compat/bf16_ops.py). bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md,
# GPU hosts).
optim_wrapper = dict(type='AmpOptimWrapper')
