# CaiT-S36 fine-tuned on iNaturalist 2018 (8,142 classes) from its ImageNet-1K model: the recipe of
# cait-s36-in1k-pre_8xb128-1000e_flowers102.py (paper Sec. 4.4.3: ImageNet hyper-parameters, lr / 10, 224 px, crop
# ratio 0.875) for iNaturalist's 360 epochs. Paper (Table 7, CaiT-S-36 224): 77.1 top-1.
#
# Data: mmpretrain has no iNaturalist class, so mmpretrain's CustomDataset reads a "path label" list per split
# (437,513 training and 24,426 validation images, Table 6). In data/inat2018, next to the official train_val2018/
# images and train2018.json / val2018.json, write the lists once:
#   python - <<'PY'
#   import json, os
#   os.makedirs('data/inat2018/meta', exist_ok=True)
#   for split in ('train', 'val'):
#       data = json.load(open(f'data/inat2018/{split}2018.json'))
#       label = {a['image_id']: a['category_id'] for a in data['annotations']}
#       with open(f'data/inat2018/meta/{split}.txt', 'w') as out:
#           out.writelines(f"{image['file_name']} {label[image['id']]}\n" for image in data['images'])
#   PY
# (file names start with train_val2018/, relative to data_root; category ids are the labels, 0 to 8,141).
_base_ = './cait-s36-in1k-pre_8xb128-1000e_flowers102.py'

num_classes = 8142
model = dict(head=dict(num_classes=num_classes))
data_preprocessor = dict(num_classes=num_classes)
train_dataloader = dict(
    dataset=dict(_delete_=True, type='CustomDataset', data_root='data/inat2018', ann_file='meta/train.txt',
                 pipeline={{_base_.train_pipeline}}))
val_dataloader = dict(
    dataset=dict(_delete_=True, type='CustomDataset', data_root='data/inat2018', ann_file='meta/val.txt',
                 pipeline={{_base_.test_pipeline}}))
test_dataloader = val_dataloader
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=360)
