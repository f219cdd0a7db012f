# MAE pre-training of plain VisionLLaMA-L, 800 epochs (VisionLLaMA paper, appendix D.3). Same recipe as
# the Base configs: mask 0.75, AdamW betas (0.9, 0.95), wd 0.05, 40 warm-up epochs (start factor 1e-9),
# cosine to 0 at epoch 800, global batch 4096 = 8 GPUs x 512 and lr = 1.5e-4 * 4096 / 256 = 2.4e-3.
# Batch: the official VisionLLaMA-L run used 8 x 256 = 2048 images per step with the lr left at 2.4e-3
# (notes §8.12; auto_scale_lr only acts with --auto-scale-lr, which the official scripts did not pass).
# We keep the paper's batch 4096; to mimic the official run set train_dataloader.batch_size=256 and
# leave the lr unchanged.
# The decoder is the Base one (512-d x 8 blocks) fed by the 1024-d encoder (neck embed_dim=1024).
_base_ = 'mmpretrain::mae/mae_vit-large-p16_8xb512-amp-coslr-800e_in1k.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,  # drop MAEViT-only keys
        type='MAEVisionLLaMA',
        arch='large',
        img_size=224,
        patch_size=16,
        mask_ratio=0.75,
        layout='official_mae',  # weight layout of the released MAE weights (11008-wide SwiGLU with biases)
        rope_mode='as2d',  # = integer 2D RoPE at 224 px (anchor = the 14x14 training grid)
        init_cfg=[dict(type='Xavier', layer='Linear', distribution='uniform')]),
    neck=dict(type='MAEPretrainDecoder', num_patches=196, patch_size=16, embed_dim=1024),
    head=dict(type='MAEPretrainHead', norm_pix=True, patch_size=16))

# Encoder LayerNorms are named norm1/norm2/norm (not 'ln'): exempt them from weight decay by type.
optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))

# Configs inherited with `mmpretrain::` get `_scope_='mmpretrain'` stamped on nested typed dicts, and the
# Runner passes every key but `type` of `collate_fn` to the function (default_collate() got an unexpected
# keyword argument '_scope_'); restate it without the stamp.
train_dataloader = dict(collate_fn=dict(_delete_=True, type='default_collate'))
