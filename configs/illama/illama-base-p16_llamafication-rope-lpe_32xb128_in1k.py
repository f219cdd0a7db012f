# LLaMAfication ladder of iLLaMA-B, rung 7 of 9 (Table 17 "+ LPE", Sec. 3.4).
# Paper (Table 17, Base): 81.2 top-1, final train loss 2.839.
# The learnable position embedding comes back beside RoPE: the iLLaMA architecture is complete.
_base_ = './illama-base-p16_llamafication-rope_32xb128_in1k.py'

model = dict(backbone=dict(use_pos_embed=True))
