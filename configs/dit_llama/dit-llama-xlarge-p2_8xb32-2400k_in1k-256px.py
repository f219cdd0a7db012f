# DiT-LLaMA-XL/2 (VisionLLaMA §4.1, Table 1): class-conditional ImageNet 256 px generation, DDPM as DiT
# trains it, 2400k steps (the paper says 2352k; the released file is 2400000.pt, "2400k iters is about 480 epochs"
# in DiTLLaMA.md). Paper FID-50K (DDPM 250 steps, ADM evaluator): 9.84 without / 2.42 with CFG 1.5 (DiT-XL/2: 10.67
# without CFG). Batch 256 = 8 GPUs x 32; the schedule, EMA and precision notes: ../_base_/schedules/.
_base_ = ['../_base_/models/dit_ddpm_sdvae.py', '../_base_/datasets/imagenet_sdvae_moments_256.py',
         '../_base_/schedules/generation_400k.py']

model = dict(network=dict(arch='xlarge', patch_size=2))
train_cfg = dict(max_iters=2_400_000)
