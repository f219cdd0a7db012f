# CaiT-XXS24 on ImageNet-1K at 224 px from scratch: the recipe of cait-s24_8xb128-400e_in1k.py (paper Sec. 4.3; see
# its header), with the two per-model hyper-parameters of paper Table 4.
#
# - arch 'xxs24' (the official registration): C 192, 24 SA blocks, 4 heads, 2 CA blocks; 11,956,264 parameters with the
#   head.
# - LayerScale init 1e-5: the arch default (paper Table 4 and the official code agree).
# - stochastic depth d_r 0.05 (Table 4), uniform over the SA blocks.
# Paper (Table 3): 77.6 top-1 trained as here (no distillation), 78.4 distilled (XXS-24Υ, = the released
# XXS24_224.pth, which is distilled like every released CaiT checkpoint).
_base_ = './cait-s24_8xb128-400e_in1k.py'

model = dict(backbone=dict(arch='xxs24', drop_path_rate=0.05), head=dict(in_channels=192))
