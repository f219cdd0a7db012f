# ViT-T/16, the paper's baseline, fine-tuned on CIFAR-10 from ImageNet-1K weights (paper Table 9 "ViT-T": 98.0
# top-1): the iLLaMA-T recipe of Table 16 (illama-tiny-p16_in1k-pre_4xb256-300e-soft-mask_cifar10.py: 224 px,
# AdamW 2e-3 @ 1024, 300 epochs, 50 warm-up epochs, mixup / cutmix, fp16 AMP) with mmpretrain's VisionTransformer
# (DeiT-T's shape: width 192, 12 blocks, 3 heads, GELU MLP 768, LayerNorm, class token first, no soft mask; the
# official run: https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/r3_vit_tiny_cifar10.sh).
#
# Init: the official run starts from the authors' own ImageNet ViT-T (not released); this config takes mmpretrain's
# DeiT-T ImageNet-1K weights (74.5 top-1, the same architecture) into the backbone; the head starts from its init.
_base_ = './illama-tiny-p16_in1k-pre_4xb256-300e_cifar10.py'

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
