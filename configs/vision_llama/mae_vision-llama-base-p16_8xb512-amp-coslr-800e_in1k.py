# MAE pre-training of plain VisionLLaMA-B on ImageNet-1K (VisionLLaMA paper, appendix D.3; the official
# mmpretrain/configs/mae/ configs). Recipe (paper D.3 = official mmpretrain config): mask ratio 0.75, AdamW betas (0.9,
# 0.95), wd 0.05, global batch 4096 = 8 GPUs x 512, lr = 1.5e-4 * 4096 / 256 = 2.4e-3, 40 linear warm-up epochs, then
# cosine to 0 at epoch 800 (1600 in the *-1600e config), RandomResizedCrop(0.2-1) + flip only, AMP,
# norm_pix MSE loss on the masked patches. Decoder: the stock MAE decoder (512-d, 8 blocks, 16 heads,
# sin-cos positions, no RoPE). Everything but the encoder is inherited from mmpretrain's MAE ViT-B config.
#
# layout='official_mae': the weight layout of the released VisionLLaMA MAE weights (the official mmpretrain
# VisionLLaMA): fused SwiGLU `ffn.w12` of width round_up(8/3 * 4D, 256) = 8192 for D = 768 (about 3x
# the FFN of ViT-B, ~256M encoder parameters) *with* biases, no LayerScale, drop path on the attention
# branch only. Use layout='clean' for a ViT-parameter-matched encoder (then the weights are not
# interchangeable with the released ones).
# rope_mode='as2d' with rope_anchor=14 (the 224 px grid), so at 224 px it is exactly the official integer
# 2D RoPE; every kept patch keeps the position of its original grid cell.
# Official-code difference: the official encoder bypasses the cls token (the raw token is
# concatenated after the last block, before the final norm); here it goes through the encoder, as in MAE
# (MAEVisionLLaMA's default). Set `cls_through_encoder=False` to reproduce the official encoder, e.g. to
# continue pre-training from the released weights. Downstream uses with_cls_token=False either way.
_base_ = 'mmpretrain::mae/mae_vit-base-p16_8xb512-amp-coslr-800e_in1k.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,  # drop MAEViT-only keys
        type='MAEVisionLLaMA',
        arch='base',
        img_size=224,
        patch_size=16,
        mask_ratio=0.75,
        mask_mode='bidirectional',  # the only mode MAE takes: it encodes a random, shuffled subset of patches
        layout='official_mae',
        rope_mode='as2d',
        rope_anchor=14,
        as2d_scaling='per_axis',  # ours; paper Eq. 4 and official code: 'isotropic' (one scale from H). Same at
        # square inputs; per_axis generalises better to non-square ones on the tiny twin (README)
        # the official MAE init: xavier-uniform Linear weights, zero biases (the MAE algorithm's own
        # init_cfg would otherwise be overridden by the backbone's default trunc-normal).
        init_cfg=[dict(type='Xavier', layer='Linear', distribution='uniform')]),
    neck=dict(type='MAEPretrainDecoder', num_patches=196, patch_size=16, embed_dim=768),
    head=dict(type='MAEPretrainHead', norm_pix=True, patch_size=16))

# The inherited custom_keys ('ln', 'bias', 'pos_embed', 'mask_token', 'cls_token') exempt the decoder
# norms (`ln1`/`ln2`) and all biases from weight decay but not the encoder's `norm1`/`norm2`/`norm`
# LayerNorms; norm_decay_mult=0 does (it selects LayerNorm modules by type, whatever their names).
# AMP dtype: fp16 (the inherited AmpOptimWrapper, dynamic loss scale), as the official mmpretrain MAE config.
# bf16: --cfg-options optim_wrapper.dtype=bfloat16 (docs/compatibility.md, GPU hosts).
optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))

# Configs inherited with `mmpretrain::` get `_scope_='mmpretrain'` stamped on nested typed dicts, and the
# Runner passes every key but `type` of `collate_fn` to the function (default_collate() got an unexpected
# keyword argument '_scope_'); restate it without the stamp.
train_dataloader = dict(collate_fn=dict(_delete_=True, type='default_collate'))

# Exact resume with the real pipeline (seeded augmentation and iterations, mid-epoch resume): mmcausal/engine/runner.
train_cfg = dict(type='ExactResumeEpochBasedTrainLoop')
