# The official DiT / SiT (and DiT-LLaMA / SiT-LLaMA) training schedule (dit/train.py and sit/train.py; paper §4.1,
# 0.D.10): AdamW lr 1e-4 constant (no warm-up, no decay, no scheduler), weight decay 0, default betas, no gradient
# clipping, batch 256 (8 GPUs x 32), 400k iterations, EMA of every weight with decay 0.9999 every step (mmengine's
# momentum is 1 - decay; sampling and evaluation use the EMA weights, which the checkpoints store as their state_dict),
# a checkpoint every 50k iterations. The learning rate is never scaled with the batch.
# Precision: the official runs used fp16 autocast + GradScaler (always on: the fork's --no-use_fp32 flag is a no-op,
# it never sets use_fp32); upstream DiT trains in fp32 (TF32). fp32 is the default here; the official fp16 AMP is
# `tools/train.py CONFIG --amp` (AmpOptimWrapper, dynamic loss scale); bf16 is
# `--cfg-options optim_wrapper.type=AmpOptimWrapper optim_wrapper.dtype=bfloat16` (GPU hosts).
_base_ = 'mmpretrain::_base_/default_runtime.py'
custom_imports = dict(imports=['mmcausal'], allow_failed_imports=False)

optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0., betas=(0.9, 0.999)))
param_scheduler = []
# per-sample seeded data (the flip) and per-iteration seeded t / noise / label dropout / posterior samples, so a
# resumed run continues exactly (mmcausal.engine.runner.exact_resume_loops)
train_cfg = dict(type='ExactResumeIterBasedTrainLoop', max_iters=400_000)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=100),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=50_000, max_keep_ckpts=-1))
log_processor = dict(by_epoch=False)
# EMA decay 0.9999 (mmengine's defaults: ema_type='ExponentialMovingAverage', update_buffers=False)
custom_hooks = [dict(type='EMAHook', momentum=1e-4, interval=1, priority='ABOVE_NORMAL')]
# the official per-rank seed is global_seed * world_size + rank: a different stream on every rank, as here
randomness = dict(seed=0, diff_rank_seed=True)
