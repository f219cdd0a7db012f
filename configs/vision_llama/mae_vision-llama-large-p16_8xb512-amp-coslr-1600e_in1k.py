# MAE pre-training of plain VisionLLaMA-L, 1600 epochs (VisionLLaMA paper, appendix D.3): the Base 1600e
# recipe with the Large encoder (see the Large 800e config for the batch-size note of the official run).
_base_ = './mae_vision-llama-base-p16_8xb512-amp-coslr-1600e_in1k.py'

model = dict(backbone=dict(arch='large'), neck=dict(embed_dim=1024))
