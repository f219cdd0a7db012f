# VisionLLaMA paper Table 7(f), VisionLLaMA-S with GAP (81.8 % top-1; the class-token default is
# vision-llama-small-p16_deit3_8xb256-800e_in1k.py, whose header gives the recipe and its sources): global average
# pooling instead of the class token: no class token, the feature is the norm of the mean patch token (the official
# use_cls_token=False: self.norm(x.mean(dim=1))). One stage (800 epochs at 224 px), as the default.
_base_ = './vision-llama-small-p16_deit3_8xb256-800e_in1k.py'

model = dict(backbone=dict(with_cls_token=False, out_type='avg_featmap', final_norm=False))
