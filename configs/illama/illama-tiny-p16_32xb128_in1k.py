# iLLaMA-T on ImageNet-1K from scratch (paper Table 13; 75.0 top-1). See the base config for the recipe.
_base_ = './illama-base-p16_32xb128_in1k.py'

model = dict(
    backbone=dict(arch='tiny', drop_path_rate=0.0),
    head=dict(in_channels=192),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.1), dict(type='CutMix', alpha=0.1)]))

warmup_epochs = 5
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
# Soft mask: bidirectional (alpha = 1) for 50 epochs, then causal.
custom_hooks = [dict(type='SoftMaskHook', schedule='constant', cutoff=50, by_epoch=True, start=1.0)]
