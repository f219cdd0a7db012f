# De-focus Mamba-B ablations on ImageNet-1K (paper Table 4): the shared default setting of the three tables, which
# every other `defocus-mamba-base_ablation-*` config changes in the components its row names. Paper Table 4's caption:
# (a) dpr = 0.4 with the auxiliary loss, (b) with the auxiliary loss, data-dependent decay and learnable RoPE, (c) dpr
# = 0.4 with data-dependent decay and learnable RoPE. So this one config is the default row of (a) (data-dependent
# decay, learnable RoPE: 81.3 top-1), the "0.4" row of (b) (81.6) and the default row of (c) (<CLS> with the auxiliary
# avg loss: 82.0). The paper gives these three numbers for what its caption describes as the same setting; (c)'s 82.0
# is also (b)'s linear(0.1, 0.7) number, so (c) may have been run with the scheduled drop path. This config follows
# the caption.
#
# The components: drop path constant 0.4 (the last block's rate, linear from 0 over the blocks, as the released code's
# linspace(0, dpr, depth); no DropPathScheduleHook), decay data-dependent and RoPE learnable (the released mixer), the
# auxiliary loss on the class-token classifier. The paper does not say which form its ablation's auxiliary loss takes;
# this config keeps the released code's (the mean of per-token CEs, aux_loss='per_token'); the paper's text describes
# average pooling then FC: --cfg-options model.head.aux_loss=pooled. Everything else is the released base recipe
# (defocus-mamba-base_8xb64-300e_in1k.py: 300 epochs, batch 512, AdamW 5e-4, EMA, RandAugment, mixup / cutmix,
# repeated augmentation): the paper's Table 4 names no other recipe.
_base_ = './defocus-mamba-base_8xb64-300e_in1k.py'

model = dict(backbone=dict(drop_path_rate=0.4))
custom_hooks = [dict(type='EMAHook', momentum=1e-4, interval=1, priority='ABOVE_NORMAL')]  # no drop-path schedule
