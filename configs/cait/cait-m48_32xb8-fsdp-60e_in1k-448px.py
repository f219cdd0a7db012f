# CaiT-M48 (356M) fine-tuned at 448 px, sharded with FSDP: the recipe of cait-m48_32xb8-60e_in1k-448px.py, run by
# mmengine's FlexibleRunner with one FSDP unit per block, the class-attention blocks included (../_base_/strategies;
# docs/sharding.md). FSDPStrategy reads `load_from` as a sharded checkpoint, so the
# 224 px pre-training (a regular checkpoint) is loaded through the model's init instead, before the model is sharded.
_base_ = ['./cait-m48_32xb8-60e_in1k-448px.py', '../_base_/strategies/fsdp.py']

model = dict(init_cfg=dict(type='Pretrained', checkpoint='work_dirs/cait-m48_8xb128-400e_in1k/epoch_400.pth'))
load_from = None
