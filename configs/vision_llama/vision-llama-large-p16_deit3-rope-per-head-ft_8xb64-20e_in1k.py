# VisionLLaMA paper Table 7(e), row N (not shared) (84.2 % top-1), stage 2 of 2: the 20-epoch 224 px fine-tune of
# vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py (its header gives the recipe and its sources) from stage 1
# vision-llama-large-p16_deit3-rope-per-head_8xb256-800e_in1k-128px.py, with the same model change: per-head RoPE: one
# 2D RoPE ladder over all 1024 channels (frequencies 10000^(-4k/1024)) cut into 16 bands, band h rotating head h,
# instead of one 64-channel ladder shared by every head.
_base_ = './vision-llama-large-p16_deit3-ft_8xb64-20e_in1k.py'

load_from = 'work_dirs/vision-llama-large-p16_deit3-rope-per-head_8xb256-800e_in1k-128px/epoch_800.pth'
model = dict(backbone=dict(rope_shared=False))
