# LLaMAfication ladder of iLLaMA-B, rung 4 of 9 (Table 17 "+ LLaMA S.A.", Sec. 3.3).
# Paper (Table 17, Base): 0.1 top-1, training failed.
# Causal self-attention (paper Eq. 1: -inf above the diagonal, strict) with the class token still first:
# the class token then attends only to itself, the head sees no image token and training fails (the
# "attention collapse"; Table 1 and Table 17 report 0.1 top-1, chance level). The next rung moves the class
# token to the end. `--cfg-options model.backbone.mask_mode=official` runs the released code's causal
# attention instead (Eq. 2 at alpha = 0: softmax over every key, then the lower-triangular mask).
_base_ = './illama-base-p16_llamafication-rmsnorm_32xb128_in1k.py'

model = dict(backbone=dict(mask_mode='causal'))
