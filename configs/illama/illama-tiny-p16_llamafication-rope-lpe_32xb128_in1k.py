# LLaMAfication ladder of iLLaMA-T, rung 7 of 9 (Table 17 "+ LPE", Sec. 3.4).
# Paper (Table 17, Tiny): 73.2 top-1, final train loss 3.531.
# The learnable position embedding comes back beside RoPE: the iLLaMA architecture is complete.
_base_ = './illama-tiny-p16_llamafication-rope_32xb128_in1k.py'

model = dict(backbone=dict(use_pos_embed=True))
