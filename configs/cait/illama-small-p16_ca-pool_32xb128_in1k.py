# iLLaMA-S with a CaiT class-attention tail as its pooling (OUR addition: no paper trained it, no result exists).
# The iLLaMA-S recipe (illama-small-p16_32xb128_in1k.py, paper Table 13) with one change: the classifier reads a
# new class token that attends, through two CaiT class-attention blocks (Touvron et al. 2021, Sec. 3; LayerNorm eps
# 1e-6; LayerScale 0.1, the paper's Sec. 2 value for a 12-block network, as CaiT ties its class stage's LayerScale to
# its SA depth), to the backbone's final patch tokens, instead of iLLaMA's post-sequence
# class token. The backbone keeps its own class token (last in the sequence; with the causal mask no patch sees it).
# Pooling choices of a classifier, all on the same backbone:
#   post-sequence [cls] (iLLaMA):  backbone.out_type='cls_token', neck=None
#   global average pooling:        backbone.out_type='avg_featmap', neck=None
#   class-attention tail (this):   backbone.out_type='featmap', neck=ClassAttentionPool
# The tail adds 3,551,616 parameters at C = 384 (CaiT-S24's class stage with its class token, plus its final norm).
# Weight decay: the base config's rule already exempts '.cls_token' (the tail's too) and every 1-D parameter.
_base_ = ['../illama/illama-small-p16_32xb128_in1k.py']

model = dict(
    backbone=dict(out_type='featmap'),
    neck=dict(_delete_=True, type='ClassAttentionPool', embed_dims=384, num_heads=6, num_layers=2,
              layer_scale_init_value=0.1))
