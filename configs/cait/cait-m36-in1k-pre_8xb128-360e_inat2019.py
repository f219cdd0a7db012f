# CaiT-M36 fine-tuned on the data of cait-s36-in1k-pre_8xb128-360e_inat2019.py with its recipe (paper Sec. 4.4.3: the
# same transfer hyper-parameters for every model) from the 224 px ImageNet-1K CaiT-M36 (cait-m36_8xb128-400e_in1k.py's
# last checkpoint): arch 'm36' with M-36's Table 4 drop path 0.3 and head width 768. Paper (Table 7, CaiT-M-36 224):
# 81.7 top-1.
_base_ = './cait-s36-in1k-pre_8xb128-360e_inat2019.py'

pretrained = 'work_dirs/cait-m36_8xb128-400e_in1k/epoch_400.pth'
model = dict(
    backbone=dict(arch='m36', drop_path_rate=0.3, init_cfg=dict(checkpoint=pretrained)),
    head=dict(in_channels=768))
