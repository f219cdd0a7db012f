# End-to-end fine-tuning of MAE-pre-trained plain VisionLLaMA-L on ImageNet-1K (VisionLLaMA paper
# Table 15): the Base config (see it for the recipe and the lr convention) with the Large encoder, 1024-d
# head and 50 epochs (5 warm-up + 45 cosine to 1e-6, as mmpretrain's MAE ViT-L benchmark).
# lr 2e-3 at batch 1024 = 8 GPUs x 128 (the paper's base lr 1e-3 per 512 images), drop path 0.1 and layer
# decay 0.45 follow Table 15. Official-config differences (notes §4): the released Large fine-tune used
# lr 4e-3 at 8 x 64 x 2 (gradient accumulation) = 1024 images and drop path 0.2; its comment says layer
# decay 0.75 but the code uses 0.45. For that variant set optim_wrapper.optimizer.lr=4e-3 and
# model.backbone.drop_path_rate=0.2.
_base_ = './vision-llama-base-p16_8xb128-coslr-100e_in1k.py'

model = dict(
    backbone=dict(
        arch='large',  # official_mae layout: 11008-wide SwiGLU with biases
        init_cfg=dict(checkpoint='work_dirs/mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k/epoch_800.pth')),
    head=dict(in_channels=1024))

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0, end=5, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=45, by_epoch=True, begin=5, end=50, eta_min=1e-6,
         convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=50)
