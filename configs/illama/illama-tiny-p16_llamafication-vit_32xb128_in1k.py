# LLaMAfication ladder of iLLaMA-T, rung 1 of 9 (Table 17 "ViT" with the basic recipe).
# Paper (Table 17, Tiny): 73.8 top-1, final train loss 3.451.
#
# The ladder (paper Appendix D, Table 17; Sec. 3.1-3.6) starts from ViT-T/16 and swaps in LLaMA's parts one at a
# time; each rung's config inherits the previous rung's and changes the one component that Table 17 names:
#   vit -> swiglu (FFN) -> rmsnorm (norm) -> causal (attention; collapses) -> ps-cls (post-sequence class token)
#   -> rope (RoPE replaces the learnable position embedding) -> rope-lpe (both) -> aug (mixup / cutmix, Sec. 3.5)
#   -> softmask (Sec. 3.6; the result is the iLLaMA-T config, illama-tiny-p16_32xb128_in1k.py)
#
# This rung: ViT-T/16, 5,717,416 parameters (timm's ViT-Ti/16): GELU MLP (hidden 4 x 192, with
# biases), LayerNorm (eps 1e-6), bidirectional attention, class token first, learnable position embedding, no RoPE.
# The basic recipe of rungs 1-8 (Table 12): AdamW lr 4e-3 @ 4096, wd 0.05, cosine, 300 epochs, 50 linear warm-up
# epochs, drop path 0.0, RandAugment (9, 0.5), random erasing 0.25, label smoothing 0.1, mixup 0.8, cutmix 1.0,
# no soft mask. Everything else (data, no decay on norms / biases / pos_embed / cls_token, fp32) is the iLLaMA-T
# config's.
_base_ = './illama-tiny-p16_32xb128_in1k.py'

model = dict(
    backbone=dict(
        ffn_type='gelu',
        norm_cfg=dict(type='LN', eps=1e-6),
        mask_mode='bidirectional',
        cls_position='first',
        use_rope=False,
        use_pos_embed=True),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))

warmup_epochs = 50  # Table 12 (the iLLaMA-T config warms up for 5)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=warmup_epochs, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-6, by_epoch=True, begin=warmup_epochs, convert_to_iter_based=True),
]
custom_hooks = []  # no soft mask before the last rung
