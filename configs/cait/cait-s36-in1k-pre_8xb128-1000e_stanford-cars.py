# CaiT-S36 fine-tuned on Stanford Cars (196 classes) from its ImageNet-1K model: the recipe of
# cait-s36-in1k-pre_8xb128-1000e_flowers102.py (paper Sec. 4.4.3: ImageNet hyper-parameters, lr / 10, 1000 epochs,
# 224 px, crop ratio 0.875). Paper (Table 7, CaiT-S-36 224): 93.5 top-1.
# Data: mmpretrain's StanfordCars (data/stanfordcars in its documented layout: car_ims/ with cars_annos.mat, or the
# cars_train / cars_test folders with devkit/); 8,144 training and 8,041 test images (Table 6).
_base_ = './cait-s36-in1k-pre_8xb128-1000e_flowers102.py'

num_classes = 196
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)
train_dataloader = dict(dataset=dict(type='StanfordCars', data_root='data/stanfordcars', split='train'))
val_dataloader = dict(dataset=dict(type='StanfordCars', data_root='data/stanfordcars', split='test'))
test_dataloader = val_dataloader
