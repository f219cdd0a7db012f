# UperNet with Pyramid VisionLLaMA-B on ADE20K: paper Table 4(a) 49.1 mIoU (single scale; Twins-SVT-B 47.7). The
# paper lists 88.5M parameters, Twins-SVT-B's figure; this model has 87,682,988 (no PEG). The small recipe with the
# B backbone and drop path 0.2 (paper D.7).
_base_ = './upernet_pyramid-vision-llama-small_8xb2-160k_ade20k-512x512.py'

pretrained = 'checkpoints/pyramid-vision-llama-base_in1k.pth'
model = dict(
    backbone=dict(arch='base', init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[96, 192, 384, 768]),
    auxiliary_head=dict(in_channels=384))
