# Mask R-CNN with iLLaMA-B and a ViTDet-style simple feature pyramid on COCO. THIS RECIPE IS OURS: the iLLaMA paper
# reports no detection result and the authors released no detection code, so nothing here reproduces a published
# number. It transfers the ViTDet recipe for a plain ViT-B (Li et al. 2022; mmdet's `projects/ViTDet`, the same
# recipe as our VisionLLaMA ViTDet config) to iLLaMA:
# - data: mmdet's LSJ 1024 pipeline (`common/lsj-100e`: scale 0.1-2.0, 1024 crop; 100 epochs = 25 epochs of a 4x
#   repeated dataset) with ViTDet's fixed 1024x1024 batch padding (`BatchFixedSizePad`); 32 GPUs x 2 = 64 images;
#   tested at 1024 padded to 1024 x 1024, as ViTDet (below).
# - model: the backbone's last block (stride 16, final RMSNorm) -> `SimpleFeaturePyramid` (strides 4-32 + P6,
#   256 channels, LN2d eps 1e-6); ViTDet heads: RPN with 2 convs, `Shared4Conv1FCBBoxHead` and a mask head with
#   LayerNorm2d (eps 1e-6, as ViTDet's LN2d) in their convs.
# - optimizer: AdamW lr 1e-4, betas (0.9, 0.999), wd 0.1 (none on norms, biases, pos_embed, cls_token), ViTDet-B's
#   layer-wise lr decay 0.7 (patch embed x 0.7**13, block i x 0.7**(12 - i), neck/heads x 1), AMP, drop path 0.1.
# - schedule: ViTDet's 100 epochs, 250-iteration warm-up, lr x 0.1 at epochs 88 and 96 (below).
# What ViTDet has and this config does not: windowed attention. iLLaMA's attention is causal over the raster order
# with a post-sequence class token; windows of it are not defined by the paper or the official code, so every
# block attends globally (4096 tokens at 1024 px).
# mask_mode='causal' (ours; not the paper's `official` post-softmax mask, there is no official detection code):
# strictly causal and the cheapest (SDPA over the causal half). `official` also runs at 4096 tokens with O(N) memory
# (one SDPA over every key twice: about twice bidirectional attention's cost). With `causal` the class token (last)
# reaches no patch, so it gets no gradient: `find_unused_parameters` for DDP. To fine-tune in the pre-training mode
# instead: `--cfg-options model.backbone.mask_mode=official`.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::common/lsj-100e_coco-instance.py',
    '../_base_/datasets/vitdet_test_1024.py',
]
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

image_size = (1024, 1024)
head_norm_cfg = dict(type='mmpretrain.LN2d', eps=1e-6, requires_grad=True)  # ViTDet's eps; see the ViTDet config
pretrained = 'checkpoints/illama-base-p16_in1k.pth'
model = dict(
    data_preprocessor=dict(
        pad_size_divisor=32, batch_augments=[dict(type='BatchFixedSizePad', size=image_size, pad_mask=True)]),
    backbone=dict(
        _delete_=True,
        type='ILLaMA',
        arch='base',
        img_size=1024,
        mask_mode='causal',
        out_indices=(-1, ),
        out_type='featmap',
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(
        _delete_=True,
        type='SimpleFeaturePyramid',
        in_channels=768,
        out_channels=256,
        scales=(4, 2, 1, 0.5),
        num_outs=5),
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=head_norm_cfg),
        mask_head=dict(norm_cfg=head_norm_cfg)))
find_unused_parameters = True

# AMP dtype: fp16 (dynamic loss scale), as ViTDet's recipe; RoIAlign and NMS run in fp32 under bf16
# (mmcausal/compat/bf16_ops.py).
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',  # dynamic loss scaling by default (needs a GPU)
    constructor='LayerDecayOptimWrapperConstructor',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(
        layer_decay_rate=0.7,
        flat_decay_mult=0.,  # norms (RMSNorm and LN2d weights) and biases
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
        }))
# ViTDet's schedule: 250-iteration linear warm-up from 0.001 (mmdet's LSJ base has 500 from 0.067), lr x 0.1 at
# epochs 88 and 96 of 100 (= 22 and 24 of the 25 epochs over the 4x repeated dataset).
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),
    dict(type='MultiStepLR', begin=0, end=25, by_epoch=True, milestones=[22, 24], gamma=0.1),
]

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop')
# Tested as ViTDet tests (and as trained): resized to 1024 (aspect kept) and padded to 1024 x 1024, so the backbone
# sees the 64 x 64 grid it was trained on. The LSJ base's test pipeline (Resize 1333 x 800, padded only to a multiple
# of 32) would give every image another grid: its 1D RoPE rows another stride and pos_embed resized to it.
test_pipeline = {{_base_.vitdet_test_pipeline}}  # ../_base_/datasets/vitdet_test_1024.py
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
