# iLLaMA-L pre-trained on ImageNet-21K, fine-tuned on ImageNet-1K at 384 px (paper Table 6: 86.0 top-1; Table 14,
# right column; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/hft18_doit16_large_basic.sh): the 384 px recipe of
# illama-base-p16_in21k-pre_8xb64_in1k-384px.py at Large size with drop path 0.3 and lr 3.5e-5 (the official run:
# 8 GPUs x 16 x 4 accumulation).
_base_ = './illama-base-p16_in21k-pre_8xb64_in1k-384px.py'

model = dict(
    backbone=dict(
        arch='large',
        drop_path_rate=0.3,
        init_cfg=dict(checkpoint='work_dirs/illama-large-p16_32xb128_in21k/epoch_90.pth')),
    head=dict(in_channels=1024))
optim_wrapper = dict(optimizer=dict(lr=3.5e-5))
