# SiT-LLaMA-B/2 (VisionLLaMA App. 0.A.1, Tables 8-10): class-conditional ImageNet 256 px generation with
# SiT's linear interpolant and velocity prediction, 400k steps. Paper FID-50K without CFG (ADM evaluator): 29.53
# with the 250-step SDE sampler (Table 8), 30.23 with the dopri5 ODE (Table 9); SiT-B/2: 35.54 / 36.90.
# Batch 256 = 8 GPUs x 32; the schedule, EMA and precision notes: ../_base_/schedules/.
_base_ = ['../_base_/models/sit_interpolant_sdvae.py', '../_base_/datasets/imagenet_sdvae_moments_256.py',
         '../_base_/schedules/generation_400k.py']

model = dict(network=dict(arch='base', patch_size=2))
