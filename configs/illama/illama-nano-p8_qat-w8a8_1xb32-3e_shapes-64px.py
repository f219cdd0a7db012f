# Tiny twin of the 8-bit QAT configs (illama-{tiny,small}-p16_qat-w8a8_32xb128_in1k.py) for CPU smoke runs: the
# nano iLLaMA of illama-nano-p8_1xb32-30e_shapes-64px.py with every block's qkv / proj / w12 / w3 fake-quantized at
# 8 bits (learnable step sizes), fine-tuned briefly from a trained full-precision nano checkpoint. Unlike the
# full-size recipe it keeps the causal mask (no soft-mask phase) and runs 3 epochs at a small lr (1 warm-up epoch,
# then cosine), so that a short run measures the cost of quantization rather than a retraining.
_base_ = ['./illama-nano-p8_1xb32-30e_shapes-64px.py']

model = dict(backbone=dict(qat=dict(bits=8)))

max_epochs = 3
optim_wrapper = dict(optimizer=dict(lr=2e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.1, by_epoch=True, end=1, convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=1, end=max_epochs, convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs, val_interval=max_epochs)
custom_hooks = []
default_hooks = dict(checkpoint=dict(interval=max_epochs, max_keep_ckpts=1))
# a trained full-precision nano checkpoint, e.g. the last one of illama-nano-p8_1xb32-30e_shapes-64px.py
load_from = 'work_dirs/illama-nano-p8_1xb32-30e_shapes-64px/epoch_30.pth'
