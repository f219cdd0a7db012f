# Tiny twin of the CLIP recipe (clip_defocus-mamba-base-p32_128xb256-32e_laion400m.py) for CPU runs on the embedded
# captioned shapes (`python tools/dataset_converters/make_shapes_datasets.py --which captions`): 1-3 shapes of one
# class in one named colour per image, captions such as "a photo of two red triangles.". Same model type (a causal
# De-focus Mamba image tower, mmpretrain's causal CLIP text transformer, CLIP's learnable clamped temperature, the
# global-batch InfoNCE), same optimizer rules and warm-up + cosine schedule; the sizes, the data (a caption table
# read by ImageTextDataset instead of webdataset shards), a word tokenizer for the captions' 32 words, the lr and no
# AMP differ. Evaluation: zero-shot classification of the held-out split into the 4 shape classes with the prompt
# "a photo of a {class}." and five other templates of the captions, averaged (chance: 25%).
_base_ = ['./clip_defocus-mamba-base-p32_128xb256-32e_laion400m.py']

data_root = 'data/shapes/captions'
classes = ('circle', 'cross', 'square', 'triangle')
caption_words = ('a', 'an', 'are', 'background', 'blue', 'circle', 'circles', 'cross', 'crosses', 'cyan', 'dark',
                 'drawing', 'green', 'image', 'is', 'light', 'of', 'on', 'orange', 'photo', 'picture', 'purple',
                 'red', 'square', 'squares', 'there', 'three', 'triangle', 'triangles', 'two', 'white', 'yellow')
context_length = 16
model = dict(
    vision_backbone=dict(arch=dict(_delete_=True, embed_dims=64, num_layers=4, dt_rank=4), img_size=64,
                         patch_size=8),  # 64 tokens: at patch 16 (16 tokens) the small shapes of 2-3 per image blur
    projection=dict(in_channels=64, out_channels=64),
    text_backbone=dict(width=64, layers=2, heads=4),
    tokenizer=dict(_delete_=True, type='WordTokenizer', words=caption_words),
    vocab_size=len(caption_words) + 4,  # padding, unknown, start, end
    transformer_width=64,
    proj_dim=64,
    context_length=context_length,
    text_prototype=list(classes),
    # the captions' templates with one shape and no colour
    text_prompt=['a photo of a {}.', 'a {}.', 'a picture of a {}.', 'an image of a {}.', 'a drawing of a {}.',
                 'there is a {}.'])

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=64, crop_ratio_range=(0.8, 1.0), backend='pillow', interpolation='bicubic'),
    dict(type='PackInputs', algorithm_keys=['text']),
]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
train_dataloader = dict(
    _delete_=True,
    batch_size=64,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    drop_last=True,
    dataset=dict(type='ImageTextDataset', data_root=data_root, ann_file='train.tsv', pipeline=train_pipeline))
val_dataloader = dict(
    _delete_=True,
    batch_size=100,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='CustomDataset', data_root=data_root, ann_file='meta/val.txt', with_label=True,
                 metainfo=dict(classes=classes), pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_evaluator = val_evaluator

max_epochs = 10
iters_per_epoch = 4800 // 64  # the generator's 4800 training pairs
warmup_iters = 2 * iters_per_epoch
max_iters = max_epochs * iters_per_epoch
optim_wrapper = dict(_delete_=True, type='OptimWrapper', optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.98),
                     eps=1e-6, weight_decay=0.1), paramwise_cfg={{_base_.optim_wrapper.paramwise_cfg}})
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=False, end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
auto_scale_lr = dict(base_batch_size=64)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=5),
    checkpoint=dict(type='CheckpointHook', interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False)
