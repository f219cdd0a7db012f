# CaiT-M36 fine-tuned at 384 px: the fine-tuning recipe of cait-s24_8xb32-60e_in1k-384px.py (the deit
# maintainers' M48↑448 recipe applied to every model, our choice; see its header) with M36's arch (C 768, 36 SA blocks,
# 16 heads, LayerScale 1e-6), head width and Table 4 drop path 0.3. The same batch of 256, as 32 GPUs x 8 (a
# 271M-parameter model at 576 tokens). Also evaluates the released M36_384.pth.
# Paper (Table 3): M-36↑384 84.9 top-1 without distillation (the target of this config), 86.1 distilled (↑384Υ, the
# released weights; Table 5). 271,221,352 parameters at 384 px (270,929,512 at 224).
# Only the 384 px model was released; the 224 px model it starts from trains with cait-m36_8xb128-400e_in1k.py.
_base_ = './cait-s24_8xb32-60e_in1k-384px.py'

model = dict(backbone=dict(arch='m36', drop_path_rate=0.3), head=dict(in_channels=768))
train_dataloader = dict(batch_size=8)
val_dataloader = dict(batch_size=8)
test_dataloader = val_dataloader
load_from = 'work_dirs/cait-m36_8xb128-400e_in1k/epoch_400.pth'
