# Table 8 row 9 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ Inference at
# higher resolution [256]", 83.8 top-1 (68M, 18.6 GFLOPs). The model of the previous rung
# (deit-small_to-cait-400e_8xb128-400e_in1k.py, 83.4), not fine-tuned, tested at 256 px: short side to int(256 /
# 0.875) = 292, centre crop 256 (crop ratio 0.875 as the rows before); the backbone resizes its 14 x 14 position table
# to the 16 x 16 grid (bicubic) at every forward. A test config: python tools/test.py CONFIG
# work_dirs/deit-small_to-cait-400e_8xb128-400e_in1k/epoch_400.pth (its training settings are the previous rung's).
_base_ = './deit-small_to-cait-400e_8xb128-400e_in1k.py'

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=292, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=256),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
