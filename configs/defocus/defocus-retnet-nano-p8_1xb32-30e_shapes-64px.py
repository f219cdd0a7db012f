# Tiny twin of the paper-derived De-focus RetNet recipe (defocus-retnet-base_8xb64-300e_in1k.py) for CPU runs on the
# embedded synthetic "shapes" data (ImageNet layout). Same backbone type (multi-scale retention with the learnable
# decay and RoPE, GroupNorm, SiLU gate, class token last, chunk-wise form), pooled auxiliary loss and no-decay
# rules; everything else is the De-focus ViT twin's (defocus-vit-nano-p8_1xb32-30e_shapes-64px.py). At patch 16 it
# learnt unreliably (25.0 top-1 on shapes v2, chance).
_base_ = ['./defocus-vit-nano-p8_1xb32-30e_shapes-64px.py']

model = dict(backbone=dict(_delete_=True, type='DefocusRetNet', arch=dict(embed_dims=64, num_layers=4, num_heads=2),
                           img_size=64, patch_size=8, out_type='raw'))
