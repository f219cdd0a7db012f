# Shared data blocks of the tiny twins on the synthetic "shapes" data, ImageNet layout (data/shapes/imagenet;
# generate it with `python tools/dataset_converters/make_shapes_datasets.py`): classification (shapes_cls_*, 4
# classes, 64 px crops) and MAE pre-training (shapes_mae_*, 64 px crops, no labels).
#
# How to use it. This file defines only prefixed helper variables, never the real keys (data_root,
# train_dataloader, ...): a twin already inherits a full config that defines those, and mmengine refuses a key
# that two bases of one config define ("Duplicate key is not allowed among bases"). A twin adds this file to its
# `_base_` list and takes each block whole with `{{_base_.x}}`:
#
#   _base_ = ['./illama-tiny-p16_32xb128_in1k.py', '../_base_/datasets/shapes_imagenet.py']
#   data_root = {{_base_.shapes_cls_data_root}}
#   train_dataloader = {{_base_.shapes_cls_train_dataloader}}
#   model = dict(head=dict(num_classes={{_base_.shapes_cls_num_classes}}))
#
# `{{_base_.x}}` is replaced by the value after the twin's file has run, so it must be a whole value: no
# `len({{_base_.x}})` or `dict({{_base_.x}}, key=...)` (they would see a placeholder string). The blocks are
# partial and are merged into the inherited ones (dataset type, split, sampler come from the full config). A twin
# that needs another batch size builds its dataloader from the dataset block:
# `train_dataloader = dict(batch_size=16, dataset={{_base_.shapes_cls_train_dataset}})`.
shapes_cls_classes = ('circle', 'cross', 'square', 'triangle')
shapes_cls_num_classes = len(shapes_cls_classes)
shapes_cls_data_root = 'data/shapes/imagenet'

shapes_cls_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.6, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
shapes_cls_test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
shapes_cls_train_dataset = dict(data_root=shapes_cls_data_root, metainfo=dict(classes=shapes_cls_classes),
                                pipeline=shapes_cls_train_pipeline)
shapes_cls_val_dataset = dict(data_root=shapes_cls_data_root, metainfo=dict(classes=shapes_cls_classes),
                              pipeline=shapes_cls_test_pipeline)
shapes_cls_train_dataloader = dict(batch_size=32, num_workers=2, persistent_workers=True,
                                   dataset=shapes_cls_train_dataset)
shapes_cls_val_dataloader = dict(batch_size=64, num_workers=2, persistent_workers=True,
                                 dataset=shapes_cls_val_dataset)
shapes_cls_val_evaluator = dict(type='Accuracy', topk=(1, ))

# MAE pre-training: the same images, without labels; a wider crop range than classification.
shapes_mae_data_root = shapes_cls_data_root
shapes_mae_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.5, 1.0), backend='pillow',
         interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
shapes_mae_train_dataset = dict(data_root=shapes_mae_data_root, pipeline=shapes_mae_train_pipeline)
shapes_mae_train_dataloader = dict(batch_size=32, num_workers=2, persistent_workers=True,
                                   dataset=shapes_mae_train_dataset)
