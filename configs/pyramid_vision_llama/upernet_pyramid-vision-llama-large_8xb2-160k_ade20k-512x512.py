# UperNet with Pyramid VisionLLaMA-L on ADE20K: paper Table 4(a) 50.0 mIoU (single scale; Twins-SVT-L 48.8). The
# paper lists 133M parameters, Twins-SVT-L's figure; this model has 138,232,620 (wider SwiGLUs, no PEG). The small
# recipe with the L backbone and drop path 0.3 (official L config).
_base_ = './upernet_pyramid-vision-llama-small_8xb2-160k_ade20k-512x512.py'

pretrained = 'checkpoints/pyramid-vision-llama-large_in1k.pth'
model = dict(
    backbone=dict(arch='large', drop_path_rate=0.3, init_cfg=dict(checkpoint=pretrained)),
    decode_head=dict(in_channels=[128, 256, 512, 1024]),
    auxiliary_head=dict(in_channels=512))
