# The data of the image-generation CPU twins: the real shapes images (ImageNet layout,
# 4 classes, data/shapes/imagenet; `python tools/dataset_converters/make_shapes_datasets.py --which imagenet`),
# BOX-downsampled to 32 px as the judge sees them (configs/generation_judge/), horizontal flips (the classes are
# flip-invariant), with their class labels. Prefixed helper variables only, taken whole with `{{_base_.x}}` (see
# shapes_imagenet.py for why). Iteration-based: an infinite shuffled stream of batches.
shapes_gen_classes = ('circle', 'cross', 'square', 'triangle')
shapes_gen_num_classes = len(shapes_gen_classes)
shapes_gen_image_size = 32
shapes_gen_train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=shapes_gen_image_size, backend='pillow', interpolation='box'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
shapes_gen_train_dataset = dict(type='ImageNet', data_root='data/shapes/imagenet', split='train',
                                metainfo=dict(classes=shapes_gen_classes), pipeline=shapes_gen_train_pipeline)
shapes_gen_train_dataloader = dict(batch_size=32, num_workers=1, persistent_workers=True,
                                   sampler=dict(type='InfiniteSampler', shuffle=True), dataset=shapes_gen_train_dataset)
