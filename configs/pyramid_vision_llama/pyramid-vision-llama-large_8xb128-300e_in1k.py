# Pyramid VisionLLaMA-L on ImageNet-1K (paper Table 2: 83.6 % top-1; the README's "99M" parameters is not this
# model, which has 104,721,128 with its head): the base recipe with drop path 0.5 and the same 8 x 128 batch
# (deit/train_p_300.sh).
_base_ = './pyramid-vision-llama-base_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch='large', drop_path_rate=0.5), head=dict(in_channels=1024))
