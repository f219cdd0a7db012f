# CaiT-S36 fine-tuned on iNaturalist 2019 (1,010 classes) from its ImageNet-1K model: the iNaturalist 2018 recipe
# (cait-s36-in1k-pre_8xb128-360e_inat2018.py: paper Sec. 4.4.3, ImageNet hyper-parameters, lr / 10, 360 epochs,
# 224 px, crop ratio 0.875). Paper (Table 7, CaiT-S-36 224): 80.6 top-1.
# Data: as for 2018 (mmpretrain's CustomDataset on "path label" lists; 265,240 training and 3,003 validation images,
# Table 6): in data/inat2019, next to the official train_val2019/ images and train2019.json / val2019.json, write
# meta/train.txt and meta/val.txt with the 2018 config's snippet, 2018 replaced by 2019.
_base_ = './cait-s36-in1k-pre_8xb128-360e_inat2018.py'

num_classes = 1010
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)
train_dataloader = dict(dataset=dict(data_root='data/inat2019'))
val_dataloader = dict(dataset=dict(data_root='data/inat2019'))
test_dataloader = val_dataloader
