# Sharded data-parallel training (FSDP) through mmengine's FlexibleRunner, for the Large models: add this file to
# the `_base_` list of a full config (docs/sharding.md). Each transformer block is one
# FSDP unit (`block_wrap_policy`): parameters, gradients and optimizer states are split over all GPUs, and only one
# block's full weights are gathered at a time. mmengine's defaults otherwise: FULL_SHARD, use_orig_params=True (the
# paramwise / layer-decay optimizer rules see the original parameters), AmpOptimWrapper -> ShardedGradScaler.
# Checkpoints are sharded (state_dict_cfg='local'): `epoch_N.pth/` holds one rank*.pth per process, and resuming needs
# the same number of processes; tools/model_converters/consolidate_sharded_checkpoint.py makes one regular file.
runner_type = 'FlexibleRunner'
strategy = dict(type='FSDPStrategy', model_wrapper=dict(auto_wrap_policy=dict(type='block_wrap_policy')))
# tools/test.py with a sharded config: the weights come from the checkpoint, skip the model's init (Pretrained files)
init_weights_for_test_or_val = False
