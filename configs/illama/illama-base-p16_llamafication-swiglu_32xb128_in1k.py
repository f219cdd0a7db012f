# LLaMAfication ladder of iLLaMA-B, rung 2 of 9 (Table 17 "+ LLaMA FFN", Sec. 3.1).
# Paper (Table 17, Base): 82.0 top-1, final train loss 2.724.
# SwiGLU replaces the GELU MLP: three bias-free projections, hidden 2048 (2/3 x 4D rounded up to
# a multiple of 256), about the MLP's parameter count.
_base_ = './illama-base-p16_llamafication-vit_32xb128_in1k.py'

model = dict(backbone=dict(ffn_type='swiglu'))
