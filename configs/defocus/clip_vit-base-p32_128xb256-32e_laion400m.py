# The baseline row of Table 3: CLIP with a non-causal ViT-B/32 image tower, OpenCLIP's ViT-B/32 (paper: 62.9
# ImageNet zero-shot top-1 as OpenCLIP reports it, 63.3 for OpenAI's; 151.3M parameters), on the recipe of the
# De-focus Mamba-B/32 config it inherits (Table 9, OpenCLIP's).
#
# The towers are OpenCLIP's ViT-B-32 shapes: mmpretrain's ViT-B at patch 32 with CLIP's pre-norm, a bias-free patch
# embedding, class token, learnable position table and final norm, projected to 512; the text tower of width 512,
# 12 layers, 8 heads. 151,277,313 parameters, OpenCLIP's count (tests/test_configs.py asserts 151.3M). One
# difference: mmpretrain's CLIP text blocks use OpenAI's QuickGELU, OpenCLIP's LAION-trained ViT-B-32 uses GELU.
_base_ = ['./clip_defocus-mamba-base-p32_128xb256-32e_laion400m.py']

model = dict(
    vision_backbone=dict(_delete_=True, type='mmpretrain.VisionTransformer', arch='base', img_size=224, patch_size=32,
                         pre_norm=True, patch_cfg=dict(bias=False), final_norm=True, out_type='cls_token'),
    text_backbone=dict(width=512, layers=12, heads=8),
    transformer_width=512)
# OpenCLIP's no-decay rule: gains, biases, the temperature and the (1-D in OpenCLIP) class embedding
optim_wrapper = dict(paramwise_cfg=dict(
    _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0,
    custom_keys={'logit_scale': dict(decay_mult=0.0), 'cls_token': dict(decay_mult=0.0)}))
