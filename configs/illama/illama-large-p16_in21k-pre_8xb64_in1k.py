# iLLaMA-L pre-trained on ImageNet-21K (illama-large-p16_32xb128_in21k.py), fine-tuned on ImageNet-1K at 224 px
# (paper Table 6: 84.8 top-1; Table 14, middle column; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/nft11_doit16_large_basic.sh): the recipe of
# illama-base-p16_in21k-pre_8xb64_in1k.py at Large size with drop path 0.3 and lr 6e-5 (the official run: 8 GPUs x
# 32 x 2 accumulation).
_base_ = './illama-base-p16_in21k-pre_8xb64_in1k.py'

model = dict(
    backbone=dict(
        arch='large',
        drop_path_rate=0.3,
        init_cfg=dict(checkpoint='work_dirs/illama-large-p16_32xb128_in21k/epoch_90.pth')),
    head=dict(in_channels=1024))
optim_wrapper = dict(optimizer=dict(lr=6e-5))
