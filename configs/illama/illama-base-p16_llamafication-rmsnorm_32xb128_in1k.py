# LLaMAfication ladder of iLLaMA-B, rung 3 of 9 (Table 17 "+ LLaMA Norm", Sec. 3.2).
# Paper (Table 17, Base): 81.7 top-1, final train loss 2.721.
# RMSNorm (eps 1e-6, no shift term) replaces every LayerNorm, the final norm included.
_base_ = './illama-base-p16_llamafication-swiglu_32xb128_in1k.py'

model = dict(backbone=dict(norm_cfg=dict(type='RMSNorm', eps=1e-6)))
