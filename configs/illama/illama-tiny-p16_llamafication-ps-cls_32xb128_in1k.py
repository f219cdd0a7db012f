# LLaMAfication ladder of iLLaMA-T, rung 5 of 9 (Table 17 "+ LLaMA S.A." with PS [CLS], Sec. 3.3).
# Paper (Table 17, Tiny): 71.9 top-1, final train loss 3.599.
# Post-sequence class token: the class token moves to the end of the sequence (its position-table row
# too), where the causal mask lets it attend to every patch.
_base_ = './illama-tiny-p16_llamafication-causal_32xb128_in1k.py'

model = dict(backbone=dict(cls_position='last'))
