# LLaMAfication ladder of iLLaMA-B, rung 8 of 9 (Table 17 "+ data aug.", Sec. 3.5 and Table 5).
# Paper (Table 17, Base): 81.3 top-1, final train loss 2.868.
# Mixup 0.95 and cutmix 1.0 instead of DeiT's 0.8 / 1.0 (the values of the iLLaMA-B config, Table 13).
_base_ = './illama-base-p16_llamafication-rope-lpe_32xb128_in1k.py'

model = dict(train_cfg=dict(augments=[dict(type='Mixup', alpha=0.95), dict(type='CutMix', alpha=1.0)]))
