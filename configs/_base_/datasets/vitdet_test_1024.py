# ViTDet's test pipeline (mmdet's projects/ViTDet, and the official ViTDet evaluation): each image resized to 1024
# with its aspect kept and padded to 1024 x 1024, the fixed size every LSJ training batch is padded to
# (BatchFixedSizePad), so plain backbones with position tables / RoPE of that grid see it at test time too. Shared by
# the ViTDet-style detectors (VisionLLaMA ViTDet, iLLaMA Mask R-CNN):
# `test_pipeline = {{_base_.vitdet_test_pipeline}}`, then the val / test dataloaders take it.
vitdet_test_size = (1024, 1024)
vitdet_test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='Resize', scale=vitdet_test_size, keep_ratio=True),
    dict(type='Pad', size=vitdet_test_size, pad_val=dict(img=(114, 114, 114))),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
