# iLLaMA-B trained on ImageNet-1K at 224 px (illama-base-p16_32xb128_in1k.py), fine-tuned at 384 px (paper Table 6:
# 83.0 top-1; Table 14, left column; the official run:
# https://github.com/techmonsterwang/iLLaMA/blob/d27201c/slurm/hft1_doit16_base_basic.sh): the 384 px fine-tuning of
# illama-base-p16_in21k-pre_8xb64_in1k-384px.py with drop path 0.8 and lr 8e-5 (the official run: 8 GPUs x 32 x 2
# accumulation).
#
# Initialisation: the whole 224 px classifier, head included (same 1000 classes), by default the official iLLaMA-B
# weights converted with tools/model_converters/illama2mmcausal.py (what the official run started from; see the
# README). The position table is resized to the 24 x 24 grid when it loads, RoPE covers the 577 tokens.
_base_ = './illama-base-p16_in21k-pre_8xb64_in1k-384px.py'

model = dict(backbone=dict(drop_path_rate=0.8, init_cfg=None))
optim_wrapper = dict(optimizer=dict(lr=8e-5))
load_from = 'checkpoints/illama-base-p16_in1k.pth'
