# The tiny autoencoder of the image-generation CPU twins: the latent path of
# DiT at toy scale. A deterministic conv autoencoder 3 -> 16 -> 32 -> 32 -> 4 (two stride-2 convs, f = 4: 32 px
# images -> 4 x 8 x 8 latents) with a mirrored decoder, trained with pixel MSE on the real shapes images at 32 px.
# Its checkpoint also holds the latent scale (1 / std of the training latents, tracked while it trains: the twin's
# 0.18215), which TinyAutoencoder(checkpoint=...) in the generator twins loads at the start of their training:
#   python tools/train.py configs/dit_llama/tiny-ae-nano-f4_1xb32-400i_shapes-32px.py
#   python tools/train.py configs/dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py
# Why a latent twin: a pixel-space twin at the same cost plateaus (p = 8 gives 192 values per token,
# more than D = 96 can emit: its eps-MSE stays at ~0.51 = 1 - 96/192 and it draws noise), and a pixel twin with p = 4
# has 4x the tokens of this one.
_base_ = ['../_base_/schedules/generation_400k.py', '../_base_/datasets/shapes_generation_32px.py']

model = dict(type='AutoencoderReconstruction',
             autoencoder=dict(type='TinyAutoencoder', channels=(16, 32, 32), latent_channels=4))
train_dataloader = dict(batch_size=32, num_workers=1, persistent_workers=True,
                        sampler=dict(type='InfiniteSampler', shuffle=True), dataset={{_base_.shapes_gen_train_dataset}})
optim_wrapper = dict(optimizer=dict(lr=3e-3))
train_cfg = dict(max_iters=400)
default_hooks = dict(logger=dict(interval=50), checkpoint=dict(interval=400))
custom_hooks = []  # no EMA: the generator trains on the last weights
