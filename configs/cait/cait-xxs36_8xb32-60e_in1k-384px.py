# CaiT-XXS36 fine-tuned at 384 px from cait-xxs36_8xb128-400e_in1k.py: the fine-tuning recipe of
# cait-s24_8xb32-60e_in1k-384px.py (the deit maintainers' M48↑448 recipe applied to every model, our choice; see its
# header) with XXS36's arch, head width and Table 4 drop path 0.1. Also evaluates the released XXS36_384.pth.
# LayerScale init (only used from scratch): the code's 1e-5, not the paper's 1e-6 (see cait-xxs36_8xb128-400e_in1k.py).
# Paper (Table 3): XXS-36↑384 81.8 top-1 without distillation (the target of this config), 82.2 distilled (↑384Υ, the
# released weights). 17,372,680 parameters at 384 px (17,299,720 at 224).
_base_ = './cait-s24_8xb32-60e_in1k-384px.py'

model = dict(backbone=dict(arch='xxs36', drop_path_rate=0.1), head=dict(in_channels=192))
load_from = 'work_dirs/cait-xxs36_8xb128-400e_in1k/epoch_400.pth'
