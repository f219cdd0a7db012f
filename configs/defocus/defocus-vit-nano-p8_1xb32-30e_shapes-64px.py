# Tiny twin of the paper-derived De-focus ViT recipe (defocus-vit-base_8xb64-300e_in1k.py) for CPU runs on the
# embedded synthetic "shapes" data (ImageNet layout). Same backbone type (causal attention with the learnable decay
# and RoPE, class token last, position table), pooled auxiliary loss and no-decay rules; data, sizes, schedule,
# clipping, repeated-augmentation sampler, drop-path schedule, EMA and no AMP are the De-focus Mamba twin's
# (defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py), which it inherits; patch 8 (64 tokens + cls) instead of 16
# (with a ReLU MLP, an earlier bug: 42.0 top-1 on shapes v2 at patch 16, 71.0 at patch 8).
_base_ = ['./defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py']

model = dict(
    backbone=dict(_delete_=True, type='DefocusViT', arch=dict(embed_dims=64, num_layers=4, num_heads=2),
                  img_size=64, patch_size=8, out_type='raw'),
    head=dict(aux_loss='pooled'))
optim_wrapper = dict(paramwise_cfg=dict(
    _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
    custom_keys={'.cls_token': dict(decay_mult=0.0), '.pos_embed': dict(decay_mult=0.0)}))
