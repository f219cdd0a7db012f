# DiT-LLaMA-XL/4 (VisionLLaMA §4.1, Table 1): class-conditional ImageNet 256 px generation, DDPM as DiT
# trains it, 400k steps. Paper FID-50K (DDPM 250 steps, ADM evaluator): 35.99 without / 18.69 with CFG 1.5
# (DiT-XL/4: 43.01 / 22.52). Batch 256 = 8 GPUs x 32; the schedule, EMA and precision notes: ../_base_/schedules/.
_base_ = ['../_base_/models/dit_ddpm_sdvae.py', '../_base_/datasets/imagenet_sdvae_moments_256.py',
         '../_base_/schedules/generation_400k.py']

model = dict(network=dict(arch='xlarge', patch_size=4))
