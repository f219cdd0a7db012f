# CaiT-M36 at 224 px with DeiT hard distillation from RegNetY-16GF: the first stage of the released M36_384.pth (paper
# Table 3, M-36Υ: 85.1 top-1 at 224; 83.8 without distillation), which
# cait-m36_dist-regnety-16gf_32xb8-60e_in1k-384px.py fine-tunes. The S24 recipe (cait-s24_8xb128-400e_in1k.py, paper
# Sec. 4.3) with M36's Table 4 values: arch m36 (C 768, 36 SA blocks, 16 heads, LayerScale init 1e-6), uniform drop path
# 0.3; the batch of 1024 as 32 GPUs x 32 (the 271M-parameter model); the distillation of
# cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py.
_base_ = './cait-s24_dist-regnety-16gf_8xb128-400e_in1k.py'

model = dict(backbone=dict(arch='m36', drop_path_rate=0.3), head=dict(in_channels=768))
train_dataloader = dict(batch_size=32)
val_dataloader = dict(batch_size=32)
test_dataloader = val_dataloader
