# Mask R-CNN with iLLaMA-B and a ViTDet-style simple feature pyramid (Li et al. 2022) on COCO:
# large-scale jitter at 1024x1024, 100 epochs (mmdet's `common/lsj-100e`: 25 epochs of a 4x repeated
# dataset), AdamW lr 1e-4, wd 0.1, batch 64. The backbone's single stride-16 map (last block, final
# norm) feeds `SimpleFeaturePyramid` (strides 4-32, plus P6 for the RPN).
# mask_mode='causal': 4096 tokens at 1024x1024 need the SDPA path (see the UperNet config).
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::common/lsj-100e_coco-instance.py',
]
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

pretrained = 'checkpoints/illama-base-p16_in1k.pth'
model = dict(
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
        num_outs=5))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    paramwise_cfg=dict(
        norm_decay_mult=0.,
        bias_decay_mult=0.,
        flat_decay_mult=0.,  # also catches RMSNorm weights, which norm_decay_mult does not know
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
        }))
