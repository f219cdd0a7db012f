# VisionLLaMA paper Table 7(b), row RMSNorm (84.4 % top-1 after both stages; an ablation of VisionLLaMA-L in the
# DeiT-III setting): RMSNorm (eps 1e-6, the official RMSNorm class) in place of every LayerNorm, the final one
# included. Everything else is the default VisionLLaMA-L of vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py,
# whose header gives the recipe and its sources. Stage 1 of 2 (800 epochs at 128 px); stage 2 is
# vision-llama-large-p16_deit3-rmsnorm-ft_8xb64-20e_in1k.py. The official RMSNorm is the blocks' default norm_layer,
# which the registrations override with LayerNorm.
_base_ = './vision-llama-large-p16_deit3_8xb256-800e_in1k-128px.py'

model = dict(backbone=dict(norm_cfg=dict(type='RMSNorm', eps=1e-6)))
