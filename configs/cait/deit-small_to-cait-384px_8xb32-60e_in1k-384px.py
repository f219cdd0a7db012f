# Table 8 row 10 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ Fine-tuning at
# higher resolution [384]", 84.8 top-1 (68M, 48.0 GFLOPs; "supersedes the inference at higher resolution" of the
# previous row). The fine-tuning stage of cait-s36_8xb32-60e_in1k-384px.py (its header: the deit maintainers' M48
# recipe, our choice for every model, since the paper gives none) from the 400-epoch rung
# (deit-small_to-cait-400e_8xb128-400e_in1k.py), tested at crop ratio 0.875 as the rows before: short side to int(384
# / 0.875) = 438, centre crop 384.
#
# The next rows of Table 8 are not configs of this rung's kind: "+ Hard distillation" (85.2) trains with a
# RegNetY-16GF teacher, and "+ Adjust crop ratio [0.875 -> 1.0]" (85.4) is the distilled model tested at crop ratio
# 1.0; without distillation, cait-s36_8xb32-60e_in1k-384px.py is this rung tested at crop ratio 1.0 (85.0, Table 10).
_base_ = './cait-s36_8xb32-60e_in1k-384px.py'

test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=438, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=384),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

load_from = 'work_dirs/deit-small_to-cait-400e_8xb128-400e_in1k/epoch_400.pth'
