# De-focus Mamba-B ablation, paper Table 4(b) (drop path), row "0.7": 80.9 top-1 (paper): a constant drop path 0.7
# (the last block's rate, linear from 0 over the blocks, as the released code's linspace(0, dpr, depth)). Everything
# else is the shared setting of defocus-mamba-base_ablation-dpr0.4_8xb64-300e_in1k.py (constant drop path 0.4, the
# auxiliary per-token loss, the released Mamba-B recipe); tests/test_models/test_defocus/test_ablation_configs.py
# checks that this config differs from its table's default in the drop path only.
_base_ = './defocus-mamba-base_ablation-dpr0.4_8xb64-300e_in1k.py'

model = dict(backbone=dict(drop_path_rate=0.7))
