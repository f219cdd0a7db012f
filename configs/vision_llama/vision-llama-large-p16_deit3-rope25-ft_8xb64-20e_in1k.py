# VisionLLaMA paper Table 7(c), row 25 % (84.5 % top-1), stage 2 of 2: the 20-epoch 224 px fine-tune of
# vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py (its header gives the recipe and its sources) from stage 1
# vision-llama-large-p16_deit3-rope25_8xb256-800e_in1k-128px.py, with the same model change: 2D RoPE on the first 16
# of the 64 channels of each head (the frequencies of a 16-channel 2D RoPE).
_base_ = './vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py'

load_from = 'work_dirs/vision-llama-large-p16_deit3-rope25_8xb256-800e_in1k-128px/epoch_800.pth'
model = dict(backbone=dict(rope_ratio=0.25))
