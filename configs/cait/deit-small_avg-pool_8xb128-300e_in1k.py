# Table 2 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"), "Baselines", row "12 + 0,
# insertion n/a": average pooling, 80.3 top-1 (22M, 4.6 GFLOPs). DeiT-S (deit-small_8xb128-300e_in1k.py, Table 2 row
# 1: 79.9) without a class token: the classifier reads the mean of the final-normed patch tokens
# (out_type='avg_featmap', the final norm before the mean as timm's global_pool='avg'; the paper does not say where
# its norm sits).
_base_ = './deit-small_8xb128-300e_in1k.py'

model = dict(backbone=dict(cls_insert_layer=None, out_type='avg_featmap'))
