# De-focus Mamba-L (330M) fine-tuned at 384 px, sharded with FSDP: the recipe of
# defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py, run by mmengine's FlexibleRunner with one FSDP unit per
# block (../_base_/strategies; docs/sharding.md). Three changes, all forced by the
# sharding, none to the recipe:
# * EMA: mmengine's EMAHook deep-copies the model, which an FSDP model refuses; ShardedEMAHook keeps the same average
#   (momentum 1e-4 every iteration, evaluation on the EMA weights) for each rank's parameter shards.
# * Start weights: FSDPStrategy reads `load_from` as a sharded checkpoint, so the converted 22K -> 1K file (see the
#   unsharded config) is loaded through the model's init instead, before the model is sharded; set its path with
#   --cfg-options model.init_cfg.checkpoint=PATH.
# * Gradient clipping at 10 (inherited) is by the norm over all shards (mmcausal.compat).
_base_ = ['./defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py', '../_base_/strategies/fsdp.py']

model = dict(init_cfg=dict(type='Pretrained', checkpoint='checkpoints/defocus-mamba-large_22kto1k.pth'))
load_from = None  # the start weights come through model.init_cfg (above)
custom_hooks = [
    dict(type='DropPathScheduleHook', start=0.1, end=0.7),
    dict(type='ShardedEMAHook', momentum=1e-4, interval=1, priority='ABOVE_NORMAL'),
]
