# ViT-T/16 fine-tuned on CIFAR-100 from ImageNet-1K weights (paper Table 9 "ViT-T": 85.5 top-1): the CIFAR-100
# iLLaMA-T recipe (Table 16, 224 px) with mmpretrain's VisionTransformer initialised from DeiT-T, as
# vit-tiny-p16_in1k-pre_4xb256-300e_cifar10.py (the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/r1_vit_tiny_cifar100.sh).
_base_ = './illama-tiny-p16_in1k-pre_4xb256-300e_cifar100.py'

vit_pretrained = ('https://download.openmmlab.com/mmclassification/v0/deit/'
                  'deit-tiny_pt-4xb256_in1k_20220218-13b382a0.pth')
model = dict(
    backbone=dict(
        _delete_=True,
        type='VisionTransformer',
        arch='deit-tiny',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.0,
        out_type='cls_token',
        init_cfg=dict(type='Pretrained', checkpoint=vit_pretrained, prefix='backbone.')))
