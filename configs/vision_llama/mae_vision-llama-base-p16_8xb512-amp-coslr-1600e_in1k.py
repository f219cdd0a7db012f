# MAE pre-training of plain VisionLLaMA-B, 1600 epochs (VisionLLaMA paper, appendix D.3). Same recipe as
# the 800e config (see it for the encoder and the layout); the schedule is mmpretrain's 1600e one:
# 40 warm-up epochs (start factor 1e-4), cosine to 0 at epoch 1600. lr = 1.5e-4 * 4096 / 256 = 2.4e-3.
_base_ = 'mmpretrain::mae/mae_vit-base-p16_8xb512-amp-coslr-1600e_in1k.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,  # drop MAEViT-only keys
        type='MAEVisionLLaMA',
        arch='base',
        img_size=224,
        patch_size=16,
        mask_ratio=0.75,
        layout='official_mae',  # weight layout of the released MAE weights (8192-wide SwiGLU with biases)
        rope_mode='as2d',  # = integer 2D RoPE at 224 px (anchor = the 14x14 training grid)
        init_cfg=[dict(type='Xavier', layer='Linear', distribution='uniform')]),
    neck=dict(type='MAEPretrainDecoder', num_patches=196, patch_size=16, embed_dim=768),
    head=dict(type='MAEPretrainHead', norm_pix=True, patch_size=16))

# Encoder LayerNorms are named norm1/norm2/norm (not 'ln'): exempt them from weight decay by type.
optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))

# Configs inherited with `mmpretrain::` get `_scope_='mmpretrain'` stamped on nested typed dicts, and the
# Runner passes every key but `type` of `collate_fn` to the function (default_collate() got an unexpected
# keyword argument '_scope_'); restate it without the stamp.
train_dataloader = dict(collate_fn=dict(_delete_=True, type='default_collate'))
