# VisionLLaMA paper Table 7(a), row GELU (84.6 % top-1 after both stages; an ablation of VisionLLaMA-L in the DeiT-III
# setting): ViT's GELU MLP (fc1 -> GELU -> fc2 with biases, 4096 hidden units) in place of the SwiGLU. Everything else
# is the default VisionLLaMA-L of vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py, whose header gives the
# recipe and its sources. Stage 1 of 2 (800 epochs at 128 px); stage 2 is
# vision-llama-large-p16_deit3-gelu-ft_8xb64-20e_in1k.py. In the official code this is the block that LAMABlock
# inherits (LSRBlockRMSNorm: timm's GELU Mlp, which LAMABlock swaps for the SwiGLU).
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(ffn_type='gelu'))
