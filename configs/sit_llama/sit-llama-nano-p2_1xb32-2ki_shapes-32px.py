# SiT-LLaMA-nano: the image-generation CPU twin of SiT-LLaMA: the network
# of ../dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py (D = 96, 4 blocks, 4 heads, patch 2, 2-D RoPE, label
# dropout 0.1) trained as SiT trains it, a velocity model of the linear interpolant, on the 4 x 8 x 8 latents of the
# tiny autoencoder (train ../dit_llama/tiny-ae-nano-f4_1xb32-400i_shapes-32px.py first). 2k steps at lr 2e-3, EMA 0.998.
# Sampling: the ODE with Heun steps on 13 time points (24 network evaluations), CFG 4 on all channels. Seeds 0-2: judge
# accuracy 0.847 +- 0.008, FD 2.21 +- 0.09 (README, CPU twin; held to bars by tests/test_generation_twins.py).
_base_ = ['../_base_/schedules/generation_400k.py', '../_base_/datasets/shapes_generation_32px.py']

autoencoder_checkpoint = 'work_dirs/tiny-ae-nano-f4_1xb32-400i_shapes-32px/iter_400.pth'
model = dict(
    type='ClassConditionalDiffusion',
    network=dict(type='DiffusionTransformer', arch=dict(embed_dims=96, num_layers=4, num_heads=4), patch_size=2,
                 block='llama', in_channels=4, input_size=8, learn_sigma=False,
                 num_classes={{_base_.shapes_gen_num_classes}}, class_dropout_prob=0.1),
    objective=dict(type='LinearInterpolant'),
    autoencoder=dict(type='TinyAutoencoder', channels=(16, 32, 32), latent_channels=4,
                     checkpoint=autoencoder_checkpoint),
    test_cfg=dict(sampler='ode', method='heun', num_steps=13, cfg_scale=4., seed=0))
train_dataloader = {{_base_.shapes_gen_train_dataloader}}
optim_wrapper = dict(optimizer=dict(lr=2e-3))
train_cfg = dict(max_iters=2000)
default_hooks = dict(logger=dict(interval=100), checkpoint=dict(interval=2000))
custom_hooks = [dict(type='EMAHook', momentum=2e-3, interval=1, priority='ABOVE_NORMAL')]
