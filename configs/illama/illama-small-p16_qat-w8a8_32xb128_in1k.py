# iLLaMA-S 8-bit quantization-aware training on ImageNet-1K (paper Sec. 4.4, Table 15; 77.4 top-1 at W8A8 in the
# paper's quantization table, 79.9 in full precision). Weights and inputs of every block's qkv / proj / w12 / w3 are
# fake-quantized at 8 bits with learnable (LSQ) step sizes (mmcausal/models/illama/quantization.py); the step sizes
# start from the full-precision statistics of the loaded checkpoint. Table 15 gives the from-scratch recipe of
# Table 13 (base lr 4e-3 for Small), which is what this config runs, starting from the full-precision model.
# Where this differs from the official code: its QAT scripts (slurm/q*_doit22_w8a8_*.sh) train from random init for
# 300 epochs with weight decay 0; this config starts from the full-precision checkpoint, as Q-ViT fine-tunes its
# quantized models, and keeps Table 15's decay 0.05. What is quantized, and how it differs from the official
# quantized model: configs/illama/README.md.
_base_ = './illama-small-p16_32xb128_in1k.py'

model = dict(backbone=dict(qat=dict(bits=8)))
# the full-precision iLLaMA-S (converted official weights, or your own run of illama-small-p16_32xb128_in1k.py)
load_from = 'checkpoints/illama-small-p16_in1k.pth'
