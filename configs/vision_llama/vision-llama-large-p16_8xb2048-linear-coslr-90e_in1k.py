# Linear probing of MAE-pre-trained plain VisionLLaMA-Large on ImageNet-1K (VisionLLaMA paper Table 14): the
# Base linear-probe recipe (LARS lr 6.4 at batch 16384, 10 warm-up + cosine, 90 epochs) with the Large
# encoder, fully frozen (frozen_stages=24), and 1024-d BatchNorm neck and head (as mmpretrain's ViT-L probe).
_base_ = './vision-llama-base-p16_8xb2048-linear-coslr-90e_in1k.py'

model = dict(
    backbone=dict(
        arch='large',
        frozen_stages=24,
        init_cfg=dict(checkpoint='work_dirs/mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k/epoch_800.pth')),
    neck=dict(input_features=1024),
    head=dict(in_channels=1024))
