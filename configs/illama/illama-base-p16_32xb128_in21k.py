# iLLaMA-B pre-trained on ImageNet-21K (paper Sec. 4.2 and Table 13, "ImageNet-21K" column; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/l6_doit16_base_basic.sh). The data set is the
# winter-21 release of ImageNet-21K-P: 11,060,223 training images of 10,450 classes, so the head has 10,450 outputs
# (93,769,426 parameters, the official log's count). The paper reports no accuracy for this stage: its models are
# the 1K fine-tunings, illama-{base,large}-p16_in21k-pre_8xb64_in1k{,-384px}.py.
#
# Recipe (Table 13): AdamW lr 1e-3 @ 4096, wd 0.01, 90 epochs, 5 linear warm-up epochs then cosine, drop path 0.1,
# RandAugment (9, 0.5), random erasing 0.25, label smoothing 0.1, mixup 0.8, cutmix 1.0; soft mask constant
# (alpha = 1, bidirectional) for 30 epochs, then causal. Everything else (no decay on norms / biases / pos_embed /
# cls_token, fp32, mask_mode='official') is the iLLaMA-B ImageNet-1K config's.
# Batch 4096 = 32 GPUs x 128 (the official run: 8 GPUs x 32 x 16 accumulation; for that set
# `train_dataloader.batch_size=32 optim_wrapper.accumulative_counts=16` and run on 8 GPUs).
#
# Data: mmpretrain's ImageNet21k layout (its `ImageNet21k` data set): data/imagenet21k/train/<class>/<image>, with
# data/imagenet21k/meta/train.txt (`<path> <label>` lines; without it the folders are scanned, which takes long).
# Only the training set is used (Sec. 4.2), so there is no validation loop: the 1K fine-tuning configs evaluate.
_base_ = './illama-base-p16_32xb128_in1k.py'

num_classes = 10450
model = dict(
    backbone=dict(drop_path_rate=0.1),
    head=dict(num_classes=num_classes),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))
data_preprocessor = dict(num_classes=num_classes)

train_dataloader = dict(dataset=dict(type='ImageNet21k', data_root='data/imagenet21k', split='train'))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None

optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.01))
warmup_epochs = 5
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=90)

# Soft mask: alpha = 1 (bidirectional) for 30 epochs, then 0 (causal).
custom_hooks = [dict(type='SoftMaskHook', schedule='constant', cutoff=30, by_epoch=True, start=1.0)]
