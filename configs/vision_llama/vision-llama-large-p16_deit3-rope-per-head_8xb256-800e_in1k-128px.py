# VisionLLaMA paper Table 7(e), row N (not shared) (84.2 % top-1 after both stages; an ablation of VisionLLaMA-L in
# the DeiT-III setting): per-head RoPE: one 2D RoPE ladder over all 1024 channels (frequencies 10000^(-4k/1024)) cut
# into 16 bands, band h rotating head h, instead of one 64-channel ladder shared by every head. Everything else is the
# default VisionLLaMA-L of vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py, whose header gives the recipe and
# its sources. Stage 1 of 2 (800 epochs at 128 px); stage 2 is
# vision-llama-large-p16_deit3-rope-per-head-ft_8xb64-20e_in1k.py. The official share_rpe=False (a table for embed_dim
# channels, viewed per head).
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(rope_shared=False))
