# Shared data blocks of the tiny detection twins on the synthetic "shapes" data, COCO layout with polygon masks
# (data/shapes/coco; generate it with `python tools/dataset_converters/make_shapes_datasets.py`): 128 px images,
# 4 classes.
#
# How to use it. This file defines only prefixed helper variables (shapes_det_*), never the real keys (data_root,
# train_dataloader, ...): a twin already inherits a full config that defines those, and mmengine refuses a key
# that two bases of one config define ("Duplicate key is not allowed among bases"). A twin adds this file to its
# `_base_` list and takes each block whole with `{{_base_.x}}`:
#
#   _base_ = ['./mask-rcnn_illama-base-p16_sfp_32xb2-lsj-100e_coco.py', '../_base_/datasets/shapes_coco.py']
#   data_root = {{_base_.shapes_det_data_root}}
#   train_dataloader = {{_base_.shapes_det_train_dataloader}}
#   val_evaluator = {{_base_.shapes_det_val_evaluator}}
#
# `{{_base_.x}}` is replaced by the value after the twin's file has run, so it must be a whole value: no
# `len({{_base_.x}})` or `dict({{_base_.x}}, key=...)` (they would see a placeholder string). The blocks are
# merged into the inherited ones: the training dataset replaces the full config's RepeatDataset wrapper
# (`_delete_`), the validation dataset and the evaluator only override fields. mmengine pops `_delete_` from the
# base value itself while merging, so take each block holding it (the training dataset or dataloader) once per
# twin. A twin that needs another batch size builds its dataloader from the dataset block:
# `train_dataloader = dict(batch_size=2, dataset={{_base_.shapes_det_train_dataset}})`.
shapes_det_classes = ('circle', 'cross', 'square', 'triangle')
shapes_det_num_classes = len(shapes_det_classes)
shapes_det_data_root = 'data/shapes/coco/'

shapes_det_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
shapes_det_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(128, 128), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
shapes_det_train_dataset = dict(
    _delete_=True,
    type='CocoDataset',
    data_root=shapes_det_data_root,
    metainfo=dict(classes=shapes_det_classes),
    ann_file='annotations/instances_train2017.json',
    data_prefix=dict(img='train2017/'),
    filter_cfg=dict(filter_empty_gt=True, min_size=8),
    pipeline=shapes_det_train_pipeline)
shapes_det_val_dataset = dict(data_root=shapes_det_data_root, metainfo=dict(classes=shapes_det_classes),
                              pipeline=shapes_det_test_pipeline)
shapes_det_train_dataloader = dict(batch_size=4, num_workers=2, dataset=shapes_det_train_dataset)
shapes_det_val_dataloader = dict(batch_size=4, num_workers=2, dataset=shapes_det_val_dataset)
shapes_det_val_evaluator = dict(ann_file=shapes_det_data_root + 'annotations/instances_val2017.json')

# The narrow detector and the 36-epoch schedule the detection twins share (FPN / RPN / RoI width 64, from scratch).
# 36 epochs of 64 images (2304 image passes): at 12 epochs the twins learnt the single-contrast draws (v1, v2) but
# not the either-polarity v3 draw (bbox mAP 0.04-0.19); lr x 2 at 12 epochs found no object at all.
#   model = dict(..., rpn_head={{_base_.shapes_det_rpn_head}}, train_cfg={{_base_.shapes_det_model_train_cfg}},
#                test_cfg={{_base_.shapes_det_model_test_cfg}})
# and, for the epoch-based twins, train_cfg / param_scheduler / default_hooks from the shapes_det_*epochs* blocks.
shapes_det_width = 64
shapes_det_rpn_head = dict(in_channels=shapes_det_width, feat_channels=shapes_det_width,
                           anchor_generator=dict(scales=[4]))
# 32 sampled RoIs per image for the RoI heads (the COCO recipes: 512): 1-3 objects per image need no more, and the RoI
# path (mmcv's CPU RoIAlign, forward and backward, and the RoI heads) is most of a twin's step. Against 64 (one run
# each, tools/train.py, bbox mAP on 48 val images of v3; bar 0.2): seed 3 (the test's draw) iLLaMA 0.249 / 0.268,
# Pyramid 0.252 / 0.245, ViTDet 0.265 / 0.440; seed 0 iLLaMA 0.320, Pyramid 0.250, ViTDet 0.296 / 0.332. A step
# is a fifth to a quarter cheaper (ViTDet side by side: 290 s against 386 s).
shapes_det_model_train_cfg = dict(rpn=dict(sampler=dict(num=64)), rpn_proposal=dict(nms_pre=300, max_per_img=100),
                                  rcnn=dict(sampler=dict(num=32)))
shapes_det_model_test_cfg = dict(rpn=dict(nms_pre=200, max_per_img=100), rcnn=dict(max_per_img=20))
shapes_det_max_epochs = 36
# Exact resume with the real pipeline (seeded augmentation and iterations): mmcausal/engine/runner.
shapes_det_epochs_train_cfg = dict(type='ExactResumeEpochBasedTrainLoop', max_epochs=shapes_det_max_epochs,
                                   val_interval=shapes_det_max_epochs)
shapes_det_epochs_param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, begin=0, end=30),
    dict(type='MultiStepLR', begin=0, end=shapes_det_max_epochs, by_epoch=True, milestones=[30], gamma=0.1),
]
shapes_det_epochs_default_hooks = dict(logger=dict(interval=10),
                                       checkpoint=dict(interval=shapes_det_max_epochs, max_keep_ckpts=1))
