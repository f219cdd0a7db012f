# iLLaMA-T fine-tuned on CIFAR-100 from its ImageNet-1K weights, without the soft mask (paper Table 9 "iLLaMA-T":
# 84.8 top-1): the CIFAR-100 soft-mask config's recipe (Table 16, 224 px) with alpha = 0 from the first step.
_base_ = './illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar100.py'

custom_hooks = []  # alpha = 0 throughout (the backbone's default soft_mask_rate)
