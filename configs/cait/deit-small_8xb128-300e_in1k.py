# DeiT-S built from the CaiT backbone's options: the starting point of the paper's ablations (Touvron et al., "Going
# deeper with Image Transformers", ICCV 2021): Table 8 row 1 ("DeiT-S [d=384, 300 epochs]", 79.9 top-1), Table 2
# row 1 (class token inserted at layer 0, 79.9) and, with a uniform drop path, Table 1's depth-12 baseline. The base
# of every `deit-small*` config in this folder: they inherit it and change only their table's component.
#
# Model: DeiT-S (Touvron et al., ICML 2021; mmpretrain's deit-small): width 384, 12 blocks, 6 heads, GELU MLP 1536,
# pre-norm LayerNorm (eps 1e-6), qkv bias, plain multi-head attention (attn_type='multi_head'), no residual weighting
# (residual_scale='none'), the class token joins the patches before block 0 (cls_insert_layer=0) and the classifier
# reads it after the final norm. ViT adds a position row to the class token; ours has none (the table covers the
# patches only, as in CaiT): that row is a constant added to a learned token, so the model computes the same
# functions with 384 fewer parameters (tests/test_models/test_cait/test_ablation_options.py checks the outputs
# against mmpretrain's VisionTransformer with the same weights). Stochastic depth 0.1 rising linearly over the blocks
# (DeiT's; drop_path_schedule='linear').
#
# Recipe: DeiT's, which is the recipe of cait-s24_8xb128-400e_in1k.py (see its header: batch 1024, AdamW 1e-3, wd
# 0.05, 5 warm-up epochs + cosine, repeated augmentation x3, RandAugment, mixup 0.8 / cutmix 1.0, label smoothing 0.1,
# random erasing 0.25, fp16), for 300 epochs (paper Sec. 4.1: "a Deit-Small model during 300 epochs"). Test: DeiT's
# crop ratio 0.875 (short side to 256, centre crop 224; mmpretrain's ImageNet test pipeline): the ablations before
# the last row of Table 8 ("Adjust crop ratio [0.875 -> 1.0]") were evaluated so.
_base_ = './cait-s24_8xb128-400e_in1k.py'

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=384, num_layers=12, num_heads=6),
        attn_type='multi_head',
        residual_scale='none',
        cls_insert_layer=0,
        drop_path_rate=0.1,
        drop_path_schedule='linear'))

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=256, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(max_epochs=300)
