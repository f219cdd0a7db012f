# UperNet with iLLaMA-T on ADE20K (paper Table 10). See the iLLaMA-B config for the recipe.
_base_ = ['./upernet_illama-base-p16_8xb2-160k_ade20k-512x512.py']

pretrained = 'checkpoints/illama-tiny-p16_in1k.pth'
model = dict(
    backbone=dict(arch='tiny', drop_path_rate=0.0,
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(in_channels=[192] * 4, out_channels=192),
    decode_head=dict(in_channels=[192] * 4, channels=192),
    auxiliary_head=dict(in_channels=192, channels=96))
