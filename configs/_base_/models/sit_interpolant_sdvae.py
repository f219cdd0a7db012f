# SiT / SiT-LLaMA (VisionLLaMA App. 0.A.1, Tables 8-10; the official sit/transport/): the network of DiT-LLaMA
# trained as a velocity model of the linear interpolant x_t = t x1 + (1 - t) x0 (t = 1 is data) on SD-VAE latents,
# label dropout 0.1. SiT keeps DiT's 8 output channels and ignores the last 4 (learn_sigma=True, as the official
# train.py builds it, so its checkpoints load).
# Sampling presets (no guidance: Tables 8 and 9 report no CFG): official_sit_sde (Table 8: Euler-Maruyama on
# linspace(0, 0.96, 250) with the diffusion w_t = 1 - t, then the mean step of 0.04) is model.test_cfg;
# official_sit_ode (Tables 9-10: dopri5, atol 1e-6, rtol 1e-3, 250 output points; needs torchdiffeq,
# requirements/optional.txt) is `--cfg-options model.test_cfg.sampler=ode` (the ODE sampler ignores the SDE's
# keys). With guidance (`--cfg-scale`), the official SiT / SiT-LLaMA forward_with_cfg rule: the first 3 of the 4
# latent channels guided, as DiT's (cfg_channels=3; `--cfg-channels all` guides every channel). Labels of
# tools/generation/sample.py: label_rule='random', each drawn uniformly as the official sample_ddp.py does (the
# paper's FID-50K follow it); 'balanced' (i mod 1000, lower variance) is `--label-rule balanced`.
vae = 'checkpoints/sd-vae-ft-ema'
# (method=None: each sampler's official default, Euler-Maruyama for the SDE and dopri5 for the ODE, so that switching
# the sampler alone, e.g. `tools/generation/sample.py --sampler ode`, gives the other table's sampler)
official_sit_sde_sampling = dict(sampler='sde', num_steps=250, method=None, diffusion_form='sigma',
                                 diffusion_norm=1., last_step='mean', last_step_size=0.04, cfg_scale=1., cfg_channels=3,
                                 seed=0, label_rule='random')
official_sit_ode_sampling = dict(official_sit_sde_sampling, sampler='ode', method='dopri5', atol=1e-6, rtol=1e-3)
model = dict(
    type='ClassConditionalDiffusion',
    network=dict(type='DiffusionTransformer', arch='small', patch_size=2, block='llama', in_channels=4, input_size=32,
                 learn_sigma=True, num_classes=1000, class_dropout_prob=0.1, rope_mode='as2d'),
    objective=dict(type='LinearInterpolant'),
    autoencoder=dict(type='MomentsLatents', decoder=dict(type='SDVAE', pretrained=vae)),
    data_preprocessor=dict(type='mmpretrain.ClsDataPreprocessor'),  # the stored moments as they are (as fp32)
    test_cfg=official_sit_sde_sampling)
