# CaiT-XXS24 fine-tuned at 384 px from cait-xxs24_8xb128-400e_in1k.py: the fine-tuning recipe of
# cait-s24_8xb32-60e_in1k-384px.py (the deit maintainers' M48↑448 recipe applied to every model, our choice; see its
# header) with XXS24's arch, head width and Table 4 drop path 0.05. Also evaluates the released XXS24_384.pth.
# Paper (Table 3): XXS-24↑384 80.4 top-1 without distillation (the target of this config), 80.9 distilled (↑384Υ, the
# released weights). 12,029,224 parameters at 384 px (the 24x24 position table; 11,956,264 at 224).
_base_ = './cait-s24_8xb32-60e_in1k-384px.py'

model = dict(backbone=dict(arch='xxs24', drop_path_rate=0.05), head=dict(in_channels=192))
load_from = 'work_dirs/cait-xxs24_8xb128-400e_in1k/epoch_400.pth'
