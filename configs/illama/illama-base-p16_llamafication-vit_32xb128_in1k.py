# LLaMAfication ladder of iLLaMA-B, rung 1 of 9 (Table 17 "ViT" with the basic recipe).
# Paper (Table 17, Base): 81.5 top-1, final train loss 2.828.
#
# The ladder (paper Appendix D, Table 17; Sec. 3.1-3.6) starts from ViT-B/16 and swaps in LLaMA's parts one at a
# time; each rung's config inherits the previous rung's and changes the one component that Table 17 names:
#   vit -> swiglu (FFN) -> rmsnorm (norm) -> causal (attention; collapses) -> ps-cls (post-sequence class token)
#   -> rope (RoPE replaces the learnable position embedding) -> rope-lpe (both) -> aug (mixup / cutmix, Sec. 3.5)
#   -> softmask (Sec. 3.6; the result is the iLLaMA-B config, illama-base-p16_32xb128_in1k.py)
#
# This rung: ViT-B/16, 86,567,656 parameters (timm's ViT-B/16): GELU MLP (hidden 4 x 768, with
# biases), LayerNorm (eps 1e-6), bidirectional attention, class token first, learnable position embedding, no RoPE.
# The basic recipe of rungs 1-8 (Table 12): AdamW lr 4e-3 @ 4096, wd 0.05, cosine, 300 epochs, 50 linear warm-up
# epochs, drop path 0.4, RandAugment (9, 0.5), random erasing 0.25, label smoothing 0.1, mixup 0.8, cutmix 1.0,
# no soft mask. Everything else (data, no decay on norms / biases / pos_embed / cls_token, fp32) is the iLLaMA-B
# config's.
_base_ = './illama-base-p16_32xb128_in1k.py'

model = dict(
    backbone=dict(
        ffn_type='gelu',
        norm_cfg=dict(type='LN', eps=1e-6),
        mask_mode='bidirectional',
        cls_position='first',
        use_rope=False,
        use_pos_embed=True),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8), dict(type='CutMix', alpha=1.0)]))
custom_hooks = []  # no soft mask before the last rung
