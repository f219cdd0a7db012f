# Shared data blocks of the tiny segmentation twins on the synthetic "shapes" data, ADE20K layout
# (data/shapes/ade20k; generate it with `python tools/dataset_converters/make_shapes_datasets.py`): 64x64 images,
# label 0 = "other" is ignored through reduce_zero_label, 4 shapes + background.
#
# How to use it. This file defines only prefixed helper variables (shapes_seg_*), never the real keys (data_root,
# train_dataloader, ...): a twin already inherits a full config that defines those, and mmengine refuses a key
# that two bases of one config define ("Duplicate key is not allowed among bases"). A twin adds this file to its
# `_base_` list and takes each block whole with `{{_base_.x}}`:
#
#   _base_ = ['./upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512.py', '../_base_/datasets/shapes_ade20k.py']
#   data_root = {{_base_.shapes_seg_data_root}}
#   train_dataloader = {{_base_.shapes_seg_train_dataloader}}
#   model = dict(decode_head=dict(num_classes={{_base_.shapes_seg_num_classes}}))
#
# `{{_base_.x}}` is replaced by the value after the twin's file has run, so it must be a whole value: no
# `len({{_base_.x}})` or `dict({{_base_.x}}, key=...)` (they would see a placeholder string). The blocks are
# partial and are merged into the inherited ones (sampler, evaluator come from the full config). A twin that
# needs another batch size builds its dataloader from the dataset block:
# `train_dataloader = dict(batch_size=4, dataset={{_base_.shapes_seg_train_dataset}})`.
shapes_seg_classes = ('background', 'circle', 'cross', 'square', 'triangle')
shapes_seg_num_classes = len(shapes_seg_classes)
shapes_seg_data_root = 'data/shapes/ade20k'

shapes_seg_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
shapes_seg_test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
# ADE20KDataset only accepts subsets of its 150 classes; BaseSegDataset reads the same layout.
shapes_seg_dataset = dict(type='BaseSegDataset', data_root=shapes_seg_data_root, img_suffix='.jpg',
                          seg_map_suffix='.png', reduce_zero_label=True, metainfo=dict(classes=shapes_seg_classes))
shapes_seg_train_dataset = dict(
    shapes_seg_dataset, data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
    pipeline=shapes_seg_train_pipeline)
shapes_seg_val_dataset = dict(
    shapes_seg_dataset, data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
    pipeline=shapes_seg_test_pipeline)
shapes_seg_train_dataloader = dict(batch_size=8, num_workers=2, dataset=shapes_seg_train_dataset)
shapes_seg_val_dataloader = dict(batch_size=8, num_workers=2, dataset=shapes_seg_val_dataset)
