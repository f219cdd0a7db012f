# VisionLLaMA paper Table 7(g), row "P-V-LLaMA-S + PEG" (81.8 % top-1): Pyramid VisionLLaMA-S with CPVT's positional
# encoding generator (the paper's [13]: tokens + a depthwise 3 x 3 convolution of their map) after the first block of
# every stage, where the official pyramid code places its `pegs` (its PEG class is not in the released code, so the
# module follows CPVT / Twins' PosConv, which Twins exempts from weight decay). Everything else is the default
# ../pyramid_vision_llama/pyramid-vision-llama-small_8xb128-300e_in1k.py (81.6 %), whose base config's header gives the
# recipe (the official deit/train_p_300.sh) and its sources. Kept with the other Table 7 configs of this folder.
_base_ = '../pyramid_vision_llama/pyramid-vision-llama-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(peg=True))
optim_wrapper = dict(paramwise_cfg=dict(custom_keys={'.peg': dict(decay_mult=0.0)}))
