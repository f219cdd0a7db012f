# VisionLLaMA paper Table 7(f), VisionLLaMA-B with GAP (83.6 % top-1), stage 2 of 2: the 20-epoch 224 px fine-tune of
# vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py (its header gives the recipe and its sources) from stage 1
# vision-llama-base-p16_deit3-gap_8xb256-800e_in1k-192px.py, with the same model: global average pooling instead of
# the class token: no class token, the feature is the norm of the mean patch token (the official use_cls_token=False:
# self.norm(x.mean(dim=1))).
_base_ = './vision-llama-base-p16_deit3-ft_8xb64-20e_in1k.py'

load_from = 'work_dirs/vision-llama-base-p16_deit3-gap_8xb256-800e_in1k-192px/epoch_800.pth'
model = dict(backbone=dict(with_cls_token=False, out_type='avg_featmap', final_norm=False))
