# Tiny twin of the paper-derived De-focus ViT recipe (defocus-vit-base_8xb64-300e_in1k.py) for CPU runs on the
# embedded synthetic "shapes" data (ImageNet layout). Same backbone type (causal attention with the learnable decay
# and RoPE, class token last, position table), pooled auxiliary loss and no-decay rules; data, sizes, schedule,
# clipping, sampler, drop-path schedule, EMA and no AMP are the De-focus Mamba twin's
# (defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py), which it inherits, except patch 8 (64 tokens + cls) instead of
# 16 and 45 epochs instead of 30: at 30 epochs it reached only 52.0 top-1 on shapes v2 and its class loss fell by
# less than the 20 % the twin test asks (lr 1e-3 / 4e-3, 4 heads or no position table did not help); 45 epochs: 85.0.
_base_ = ['./defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py']

model = dict(
    backbone=dict(_delete_=True, type='DefocusViT', arch=dict(embed_dims=64, num_layers=4, num_heads=2),
                  img_size=64, patch_size=8, out_type='raw'),
    head=dict(aux_loss='pooled'))
optim_wrapper = dict(paramwise_cfg=dict(
    _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
    custom_keys={'.cls_token': dict(decay_mult=0.0), '.pos_embed': dict(decay_mult=0.0)}))

max_epochs = 45
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-2, by_epoch=True, end=2, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=2, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
default_hooks = dict(checkpoint=dict(interval=max_epochs))
