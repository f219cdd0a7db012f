# LLaMAfication ladder of iLLaMA-T, rung 2 of 9 (Table 17 "+ LLaMA FFN", Sec. 3.1).
# Paper (Table 17, Tiny): 74.3 top-1, final train loss 3.407.
# SwiGLU replaces the GELU MLP: three bias-free projections, hidden 512 (2/3 x 4D rounded up to
# a multiple of 256), about the MLP's parameter count.
_base_ = './illama-tiny-p16_llamafication-vit_32xb128_in1k.py'

model = dict(backbone=dict(ffn_type='swiglu'))
