# De-focus Mamba-B ablation, paper Table 4(c) (loss function), row "<CLS>, no auxiliary loss": 81.6 top-1 (paper): the
# classification loss reads the class token alone, no auxiliary loss. "avg" averages the patch tokens (not the class
# token), our reading of the paper's "average token". Everything else is the shared setting of
# defocus-mamba-base_ablation-dpr0.4_8xb64-300e_in1k.py (constant drop path 0.4, the auxiliary per-token loss, the
# released Mamba-B recipe); tests/test_models/test_defocus/test_ablation_configs.py checks that this config differs
# from its table's default in the loss only.
_base_ = './defocus-mamba-base_ablation-dpr0.4_8xb64-300e_in1k.py'

model = dict(head=dict(aux_loss=None))
