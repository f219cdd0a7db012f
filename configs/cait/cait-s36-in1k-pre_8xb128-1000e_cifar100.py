# CaiT-S36 fine-tuned on CIFAR-100 from its ImageNet-1K model: the CIFAR-10 transfer recipe
# (cait-s36-in1k-pre_8xb128-1000e_cifar10.py: paper Sec. 4.4.3, lr / 100, 1000 epochs, 224 px, crop ratio 0.875) with
# 100 classes. Paper (Table 7, CaiT-S-36 224): 92.2 top-1.
# Data: mmpretrain's CIFAR100 reads data/cifar100/cifar-100-python.
_base_ = './cait-s36-in1k-pre_8xb128-1000e_cifar10.py'

num_classes = 100
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)
dataset_type = 'CIFAR100'
train_dataloader = dict(dataset=dict(type=dataset_type, data_prefix='cifar100'))
val_dataloader = dict(dataset=dict(type=dataset_type, data_prefix='cifar100'))
test_dataloader = val_dataloader
