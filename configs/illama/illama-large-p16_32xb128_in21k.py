# iLLaMA-L pre-trained on ImageNet-21K (paper Table 13; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/l9_doit16_large_basic.sh): the recipe and data of
# illama-base-p16_32xb128_in21k.py at Large size (24 blocks of width 1024, 16 heads; 320,131,282 parameters with
# the 10,450-class head, the official log's count). The same drop path 0.1 as Base (Table 13).
# Memory: the official run kept 32 images per GPU (8 GPUs x 32 x 16 accumulation); at 128 per GPU, add
# `model.backbone.with_cp=True` (gradient checkpointing) if the activations do not fit.
_base_ = './illama-base-p16_32xb128_in21k.py'

model = dict(backbone=dict(arch='large'), head=dict(in_channels=1024))
