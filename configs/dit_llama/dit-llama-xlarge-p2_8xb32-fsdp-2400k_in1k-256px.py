# DiT-LLaMA-XL/2 (675M) sharded with FSDP: the recipe of dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py run by
# mmengine's FlexibleRunner with one FSDP unit per adaLN-Zero block (../_base_/strategies; docs/sharding.md). The
# one change forced by the sharding: mmengine's EMAHook deep-copies the model, which an FSDP model refuses;
# ShardedEMAHook keeps the same average (momentum 1e-4 every iteration, sampling on the EMA weights) per shard.
_base_ = ['./dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py', '../_base_/strategies/fsdp.py']

custom_hooks = [dict(type='ShardedEMAHook', momentum=1e-4, interval=1, priority='ABOVE_NORMAL')]
