# LLaMAfication ladder of iLLaMA-B, rung 9 of 9 (Table 17 "+ soft mask", Sec. 3.6).
# Paper (Table 17, Base): 81.6 top-1, final train loss 2.828.
# The soft mask (Eq. 2): alpha from 1 (bidirectional) to 0 (causal) linearly over the first 25 epochs
# (Table 3's best Base schedule), with the 50 warm-up epochs of the recipe. mask_mode='official'
# computes Eq. 2 as the released code does (softmax over every key, then the mask
# S = alpha + (1 - alpha) * tril). This rung resolves to the iLLaMA-B config,
# illama-base-p16_32xb128_in1k.py (tests/test_models/test_illama/test_llamafication.py).
_base_ = './illama-base-p16_llamafication-aug_32xb128_in1k.py'

model = dict(backbone=dict(mask_mode='official'))

custom_hooks = [dict(type='SoftMaskHook', schedule='linear', cutoff=25, by_epoch=True, start=1.0)]
