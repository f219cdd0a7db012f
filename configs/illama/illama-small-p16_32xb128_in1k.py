# iLLaMA-S on ImageNet-1K from scratch (paper Table 13; 79.9 top-1). See the base config for the recipe.
_base_ = './illama-base-p16_32xb128_in1k.py'

model = dict(
    backbone=dict(arch='small', drop_path_rate=0.1),
    head=dict(in_channels=384),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.5), dict(type='CutMix', alpha=0.5)]))

warmup_epochs = 5
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
custom_hooks = [dict(type='SoftMaskHook', schedule='linear', cutoff=50, by_epoch=True, start=1.0)]
