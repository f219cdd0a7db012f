# LLaMAfication ladder of iLLaMA-T, rung 3 of 9 (Table 17 "+ LLaMA Norm", Sec. 3.2).
# Paper (Table 17, Tiny): 74.5 top-1, final train loss 3.406.
# RMSNorm (eps 1e-6, no shift term) replaces every LayerNorm, the final norm included.
_base_ = './illama-tiny-p16_llamafication-swiglu_32xb128_in1k.py'

model = dict(backbone=dict(norm_cfg=dict(type='RMSNorm', eps=1e-6)))
