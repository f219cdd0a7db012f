# MAE pre-training of plain VisionLLaMA-B, 1600 epochs (VisionLLaMA paper, appendix D.3). The 800e config
# (see it for the recipe, the encoder and the layout) with mmpretrain's 1600e MAE schedule: 40 warm-up
# epochs (start factor 1e-4), then cosine to 0 at epoch 1600. lr = 1.5e-4 * 4096 / 256 = 2.4e-3.
_base_ = './mae_vision-llama-base-p16_8xb512-amp-coslr-800e_in1k.py'

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-4, by_epoch=True, begin=0, end=40, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', T_max=1560, by_epoch=True, begin=40, end=1600, convert_to_iter_based=True)
]
train_cfg = dict(max_epochs=1600)
