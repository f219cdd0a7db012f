# UperNet with iLLaMA-T on ADE20K (paper Table 10: 37.7 mIoU multi-scale, 10.86M parameters; official
# `upernet_doit_tiny_12_512_slide_160k_ade20k_ms.py`). The iLLaMA-B config with the official Tiny differences:
# 192-d backbone without drop path, Feature2Pyramid / UPerHead at 192 channels (the UPerHead width follows the
# backbone, as officially), the FCN auxiliary head keeps 256 channels (it is part of Table 10's 10.86M).
# Recipe (lr 3e-5, wd 0.05, layer decay 0.9, 160k) and tests are the B config's; see it for every choice.
_base_ = ['./upernet_illama-base-p16_8xb2-160k_ade20k-512x512.py']

width = 192
pretrained = 'checkpoints/illama-tiny-p16_in1k.pth'
model = dict(
    backbone=dict(arch='tiny', drop_path_rate=0.0,
                  init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    neck=dict(embed_dim=width),
    decode_head=dict(in_channels=[width] * 4, channels=width),
    auxiliary_head=dict(in_channels=width))
