# VisionLLaMA paper Table 7(c), row 50 % (84.5 % top-1 after both stages; an ablation of VisionLLaMA-L in the DeiT-III
# setting): 2D RoPE on the first 32 of the 64 channels of each head (the frequencies of a 32-channel 2D RoPE).
# Everything else is the default VisionLLaMA-L of vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py, whose header
# gives the recipe and its sources. Stage 1 of 2 (800 epochs at 128 px); stage 2 is
# vision-llama-large-p16_deit3-rope50-ft_8xb64-20e_in1k.py. Paper vs code: as the 25 % row, we follow the paper and
# the official attention code (rpe_ratio), which the released model class does not pass to its blocks.
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(rope_ratio=0.5))
