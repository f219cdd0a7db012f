# iLLaMA-T fine-tuned on CIFAR-100 from its ImageNet-1K weights, with the soft mask (paper Table 9 "+ soft mask":
# 85.5 top-1). The CIFAR-10 recipe (illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py: Table 16, 224 px)
# with 100 classes and the soft mask's cutoff at 50 epochs (App. C.5; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/r24_doit_tiny_cifar100.sh).
# Data: mmpretrain's CIFAR100 reads data/cifar100/cifar-100-python.
_base_ = './illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py'

num_classes = 100
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)
dataset_type = 'CIFAR100'
train_dataloader = dict(dataset=dict(type=dataset_type, data_prefix='cifar100'))
val_dataloader = dict(dataset=dict(type=dataset_type, data_prefix='cifar100'))
test_dataloader = val_dataloader

custom_hooks = [dict(type='SoftMaskHook', schedule='linear', cutoff=50, by_epoch=True, start=1.0)]
