# VisionLLaMA paper Table 7(g), row "P-V-LLaMA-S + LPE" (81.6 % top-1): Pyramid VisionLLaMA-S with DeiT's learnable
# absolute position embedding (the paper's [62]) added to the first stage's tokens, for the 56 x 56 grid of 224 px
# (trunc-normal(0.02) start, no weight decay, as DeiT's pos_embed). Everything else is the default
# ../pyramid_vision_llama/pyramid-vision-llama-small_8xb128-300e_in1k.py (81.6 %), whose base config's header gives the
# recipe (the official deit/train_p_300.sh) and its sources. The released code has no working LPE for the pyramid
# model (its forward never adds a position embedding), so the embedding follows DeiT: one table at the input. Kept
# with the other Table 7 configs of this folder.
_base_ = '../pyramid_vision_llama/pyramid-vision-llama-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(abs_pos_embed=True))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.pos_embed': dict(decay_mult=0.0)}))
