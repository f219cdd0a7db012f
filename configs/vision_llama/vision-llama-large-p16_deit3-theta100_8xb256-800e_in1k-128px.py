# VisionLLaMA paper Table 7(d), row 100 (84.6 % top-1 after both stages; an ablation of VisionLLaMA-L in the DeiT-III
# setting): RoPE frequency base 100 instead of 10000. Everything else is the default VisionLLaMA-L of
# vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py, whose header gives the recipe and its sources. Stage 1 of 2
# (800 epochs at 128 px); stage 2 is vision-llama-large-p16_deit3-theta100-ft_8xb64-20e_in1k.py. The official model's
# theta argument.
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(rope_theta=100.))
