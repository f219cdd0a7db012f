# iLLaMA-T fine-tuned on CIFAR-10 from its ImageNet-1K weights, without the soft mask (paper Table 9 "iLLaMA-T":
# 97.9 top-1): the soft-mask config's recipe (illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py: Table 16,
# 224 px) with alpha = 0 from the first step, i.e. the causal attention of Eq. 2 as the released code computes it
# (mask_mode='official'; the official run: https://github.com/techmonsterwang/iLLaMA/blob/d27201c/main_transfer.py,
# which has no mask schedule and keeps the model's alpha of 0).
_base_ = './illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py'

custom_hooks = []  # alpha = 0 throughout (the backbone's default soft_mask_rate)
