# DiT / DiT-LLaMA (VisionLLaMA §4.1, Table 1; the official dit/models.py and dit/diffusion/): a class-conditional
# diffusion transformer on SD-VAE latents (4 x 32 x 32 at 256 px) trained with DDPM's hybrid loss (T = 1000, linear
# betas 1e-4..0.02, learned-range variance: L_simple + L_vb), label dropout 0.1 for classifier-free guidance. RoPE
# 'as2d' equals the official integer 2-D positions at the training grid and lets the model sample other sizes.
# Sampling (model.test_cfg): the official DiT preset, 250 respaced DDPM steps with CFG 1.5 on the first 3 latent
# channels (Table 1's "CFG: Y" rows); `--cfg-options model.test_cfg.cfg_scale=1.0` gives the "N" rows. The VAE
# decoder (a local diffusers folder, read only when decoding samples) is stabilityai/sd-vae-ft-ema, as the official
# sample_ddp.py; training reads only the stored moments. Labels of tools/generation/sample.py: label_rule='random',
# each drawn uniformly as the official sample_ddp.py does (the paper's FID-50K follow it); 'balanced' (i mod 1000,
# lower variance) is `--label-rule balanced`.
vae = 'checkpoints/sd-vae-ft-ema'
official_dit_sampling = dict(sampler='ddpm', num_steps=250, cfg_scale=1.5, cfg_channels=3, seed=0, label_rule='random')
model = dict(
    type='ClassConditionalDiffusion',
    network=dict(type='DiffusionTransformer', arch='base', patch_size=4, block='llama', in_channels=4, input_size=32,
                 learn_sigma=True, num_classes=1000, class_dropout_prob=0.1, rope_mode='as2d'),
    objective=dict(type='GaussianDiffusion', num_timesteps=1000, learn_sigma=True),
    autoencoder=dict(type='MomentsLatents', decoder=dict(type='SDVAE', pretrained=vae)),
    data_preprocessor=dict(type='mmpretrain.ClsDataPreprocessor'),  # the stored moments as they are (as fp32)
    test_cfg=official_dit_sampling)
