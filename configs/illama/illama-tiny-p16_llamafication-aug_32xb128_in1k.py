# LLaMAfication ladder of iLLaMA-T, rung 8 of 9 (Table 17 "+ data aug.", Sec. 3.5 and Table 5).
# Paper (Table 17, Tiny): 74.3 top-1, final train loss 2.990.
# Mixup 0.1 and cutmix 0.1 instead of DeiT's 0.8 / 1.0 (the values of the iLLaMA-T config, Table 13).
_base_ = './illama-tiny-p16_llamafication-rope-lpe_32xb128_in1k.py'

model = dict(train_cfg=dict(augments=[dict(type='Mixup', alpha=0.1), dict(type='CutMix', alpha=0.1)]))
