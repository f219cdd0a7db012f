# Table 8, "+ Adjust crop ratio [0.875 -> 1.0]" (85.4, the released S36_384.pth): the distilled ↑384 rung
# (deit-small_to-cait-dist-regnety-16gf_8xb32-60e_in1k-384px.py) tested as CaiT's released models are: the short side
# resized to 384 and a 384 center crop (crop ratio 1.0, paper Sec. 4.5.3) instead of 438 -> 384 (0.875). A test config
# of the previous rung's model (the same training).
_base_ = './deit-small_to-cait-dist-regnety-16gf_8xb32-60e_in1k-384px.py'

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=384, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=384),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
