# VisionLLaMA paper Table 7(c), row 25 % (84.5 % top-1 after both stages; an ablation of VisionLLaMA-L in the DeiT-III
# setting): 2D RoPE on the first 16 of the 64 channels of each head (the frequencies of a 16-channel 2D RoPE).
# Everything else is the default VisionLLaMA-L of vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py, whose header
# gives the recipe and its sources. Stage 1 of 2 (800 epochs at 128 px); stage 2 is
# vision-llama-large-p16_deit3-rope25-ft_8xb64-20e_in1k.py. Paper vs code: the official rpe_ratio builds the narrower
# table and its RAttention rotates q[..., :rpe_dim], but the released model class does not pass rpe_ratio to its
# blocks, whose attention then rotates every channel with the narrower table and cannot broadcast. We follow the paper
# and the attention code (the first channels rotated).
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(rope_ratio=0.25))
