# DINO-4scale with De-focus Mamba-B and a simple feature pyramid on COCO, 36 epochs: the released
# detection/configs/dino/defocus_mamba_base_36ep.py. Official README result (released numbers, not
# measured by us): 53.2 box AP (AP50 71.5, AP75 58.0). Everything but the schedule is the 12-epoch config (see its
# header: recipe, resolution transfer with the fixed 4.57 / 20.0 or 'auto', initialisation from a converted
# checkpoint). Schedule: 36 epochs, lr x 0.1 after epochs 27 and 33 (mmdet's own DINO 36e steps once, at 30).
_base_ = ['./dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py']

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33], gamma=0.1),
]
