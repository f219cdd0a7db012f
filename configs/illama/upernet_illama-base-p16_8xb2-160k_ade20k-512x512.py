# UperNet with iLLaMA-B on ADE20K (paper Sec. 4.5, Table 10: 512x512, AdamW lr 6e-5, wd 0.01, 160k iters).
# Inherits mmseg's ViT-B UperNet recipe (MultiLevelNeck + UPerHead + FCN auxiliary head) and swaps in
# the backbone. Initialise from an ImageNet checkpoint converted with
# `tools/model_converters/illama2mmcausal.py` (the position table is resized from 224 to 512 on load).
#
# mask_mode='causal': strict causal attention through SDPA (O(N) memory at N = 1025 tokens). The official
# post-softmax soft mask materialises heads x N x N scores per block; the authors' segmentation code also
# used a plain causal mask.
_base_ = ['mmseg::vit/vit_vit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

pretrained = 'checkpoints/illama-base-p16_in1k.pth'
model = dict(
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='ILLaMA',
        arch='base',
        img_size=512,
        mask_mode='causal',
        out_indices=(3, 5, 7, 11),
        out_type='featmap',
        final_norm=False,
        drop_path_rate=0.1,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')),
    test_cfg=dict(mode='slide', crop_size=(512, 512), stride=(341, 341)))

optim_wrapper = dict(
    paramwise_cfg=dict(custom_keys={
        'pos_embed': dict(decay_mult=0.),
        'cls_token': dict(decay_mult=0.),
        'norm': dict(decay_mult=0.),
    }))
