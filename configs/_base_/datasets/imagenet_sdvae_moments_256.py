# ImageNet-1k train at 256 px as DiT / SiT and their VisionLLaMA forks train on it (the official dit/train.py), through
# the SD-VAE posterior moments of every ADM centre crop and of its horizontal flip, stored once:
#   python tools/generation/extract_latents.py data/imagenet/train data/imagenet_sd-vae-ft-ema_256 \
#       --vae checkpoints/sd-vae-ft-ema
# Each step takes the crop or its flip (p = 0.5) and MomentsLatents samples a latent from its moments: the official
# code runs the encoder every step and samples latent_dist, the same distribution (the encoder is deterministic).
data_root = 'data/imagenet_sd-vae-ft-ema_256'
train_dataloader = dict(
    batch_size=32,
    num_workers=8,
    persistent_workers=True,
    pin_memory=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(type='LatentMomentsDataset', data_root=data_root, flip_prob=0.5))
# no validation during training (the paper evaluates FID-50K offline: tools/generation/)
val_dataloader = val_evaluator = val_cfg = None
test_dataloader = test_evaluator = test_cfg = None
