# VisionLLaMA paper Table 7(d), row 100000 (84.4 % top-1), stage 2 of 2: the 20-epoch 224 px fine-tune of
# vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py (its header gives the recipe and its sources) from stage 1
# vision-llama-large-p16_deit3-theta100000_8xb256-800e_in1k-128px.py, with the same model change: RoPE frequency base
# 100000 instead of 10000.
_base_ = './vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py'

load_from = 'work_dirs/vision-llama-large-p16_deit3-theta100000_8xb256-800e_in1k-128px/epoch_800.pth'
model = dict(backbone=dict(rope_theta=100000.))
