# LLaMAfication ladder of iLLaMA-B, rung 6 of 9 (Table 17 "+ LLaMA P.E.", Sec. 3.4).
# Paper (Table 17, Base): 81.2 top-1, final train loss 2.861.
# 1D RoPE on q / k (theta 10000, positions 0..N, the class token at N) replaces the learnable position
# embedding: the backbone has no pos_embed.
_base_ = './illama-base-p16_llamafication-ps-cls_32xb128_in1k.py'

model = dict(backbone=dict(use_rope=True, use_pos_embed=False))
