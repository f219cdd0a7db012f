# Pyramid VisionLLaMA-S on ImageNet-1K (paper Table 2: 81.6 % top-1; the README's "22M" parameters is not this
# model, which has 25,903,976 with its head): the base recipe with drop path 0.2 (deit/train_p_300.sh).
_base_ = './pyramid-vision-llama-base_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch='small', drop_path_rate=0.2), head=dict(in_channels=512))
