# VisionLLaMA paper Table 7(f), VisionLLaMA-B with GAP (83.6 % top-1; the class-token default is
# vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py, whose header gives the recipe and its sources): global
# average pooling instead of the class token: no class token, the feature is the norm of the mean patch token (the
# official use_cls_token=False: self.norm(x.mean(dim=1))). Stage 1 of 2; stage 2 is
# vision-llama-base-p16_deit3-gap-ft_8xb64-20e_in1k.py.
_base_ = './vision-llama-base-p16_deit3_8xb256-800e_in1k-192px.py'

model = dict(backbone=dict(with_cls_token=False, out_type='avg_featmap', final_norm=False))
