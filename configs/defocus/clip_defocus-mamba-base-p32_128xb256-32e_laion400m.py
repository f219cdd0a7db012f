# CLIP with a De-focus Mamba-B/32 image tower on LAION-400M, zero-shot ImageNet-1K classification (paper Table 3:
# 62.7 top-1, 161.9M parameters; App. B.4, Table 9: OpenCLIP's recipe). No code was released for it; this is the
# recipe of Table 9 on mmcausal's ContrastiveCLIP (mmpretrain's CLIP text tower and zero-shot classifier, trainable):
# 224 px, 32 epochs, batch 32768 = 128 GPUs x 256 (the paper's 128 A100s), AdamW lr 5e-4, betas (0.9, 0.98), wd 0.1,
# 20k linear warm-up iterations then cosine per iteration, the symmetric InfoNCE over the global batch with CLIP's
# learnable temperature (init 1/0.07, logits scaled by at most 100).
#
# From OpenCLIP where the paper is silent: eps 1e-6; no weight decay on gains, biases and the temperature (OpenCLIP's
# rule) nor on Mamba's A_log (the De-focus classification rule); RandomResizedCrop scale (0.9, 1.0) bicubic, OpenAI's
# mean / std; zero-shot with OpenAI's 80 ImageNet templates and class names (mmpretrain's 'openai_imagenet',
# 'imagenet'). No drop path (none is reported; OpenCLIP's ViT-B/32 has none).
#
# Parameters. The paper gives only the total. Our De-focus Mamba-B/32 tower is 92,882,304 and its projection to the
# 512-d joint space 393,216; OpenCLIP's ViT-B/32 text tower (width 512, 12 layers) would give 156.7M in all, 5.2M
# short. Keeping OpenCLIP's vocabulary (49,408 BPE ids), context (77), 8 heads and 512-d joint space, the text
# widths that reach 161.9M with a whole number of layers are 624 (8 layers) and 440 (20 layers); this config takes
# the shallower, 624 x 8 (68.6M): 161,919,889 parameters (tests/test_configs.py asserts 161.9M).
#
# Data: LAION-400M as webdataset shards (img2dataset's output: <key>.jpg + <key>.txt per sample), read by
# mmcausal's WebDatasetImageText; set num_samples to the pairs your download holds (img2dataset's stats).
_base_ = ['mmpretrain::_base_/default_runtime.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

context_length = 77
num_samples = 400_000_000  # pairs in one epoch (all processes)
global_batch = 32768
model = dict(
    type='ContrastiveCLIP',
    vision_backbone=dict(type='DefocusMamba', arch='base', img_size=224, patch_size=32, out_type='cls_token'),
    projection=dict(type='mmpretrain.CLIPProjection', in_channels=768, out_channels=512),
    text_backbone=dict(type='mmpretrain.CLIPTransformer', width=624, layers=8, heads=8),
    tokenizer=dict(type='OpenCLIPTokenizer'),
    vocab_size=49408,
    transformer_width=624,
    proj_dim=512,
    context_length=context_length,
    text_prototype='imagenet',
    text_prompt='openai_imagenet',
    data_preprocessor=dict(mean=[122.770938, 116.7460125, 104.09373615], std=[68.5005327, 66.6321579, 70.32316305],
                           to_rgb=True))

train_pipeline = [  # no LoadImageFromFile: WebDatasetImageText decodes the shards' images
    dict(type='RandomResizedCrop', scale=224, crop_ratio_range=(0.9, 1.0), backend='pillow', interpolation='bicubic'),
    dict(type='PackInputs', algorithm_keys=['text']),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=224, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=256,
    num_workers=8,
    persistent_workers=True,
    sampler=None,  # an iterable dataset: shards are split over processes and workers by the dataset
    collate_fn=dict(type='default_collate'),
    drop_last=True,  # every process contrasts the same number of pairs
    # on_error='skip': a web-scale download holds the odd broken image; it is left out with a warning
    dataset=dict(type='WebDatasetImageText', data_root='data/laion400m', urls='{00000..41407}.tar',
                 num_samples=num_samples, shuffle_buffer=5000, on_error='skip', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    collate_fn=dict(type='default_collate'),
    dataset=dict(type='ImageNet', data_root='data/imagenet', split='val', pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator

# AMP dtype: bf16 without loss scaling (the De-focus Mamba recipes' autocast; OpenCLIP's default is fp16 with a
# scaler: --cfg-options optim_wrapper.dtype=float16 optim_wrapper.loss_scale=dynamic).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    dtype='bfloat16',
    loss_scale=1.0,
    optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.1),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={'logit_scale': dict(decay_mult=0.0), '.A_log': dict(decay_mult=0.0)}))
# OpenCLIP's schedule in iterations of the global batch: linear warm-up, then cosine to 0 over the rest.
warmup_iters = 20000
max_epochs = 32
max_iters = max_epochs * (num_samples // global_batch)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=False, end=warmup_iters),
    dict(type='CosineAnnealingLR', eta_min=0.0, by_epoch=False, begin=warmup_iters, end=max_iters),
]
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=global_batch)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3))
custom_hooks = [dict(type='DatasetEpochHook')]  # the shards' order of epoch e, also after resuming
