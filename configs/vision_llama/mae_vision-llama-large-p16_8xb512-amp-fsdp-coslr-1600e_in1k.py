# MAE pre-training of VisionLLaMA-L, 1600 epochs, sharded with FSDP: mae_vision-llama-large-p16_8xb512-amp-coslr-
# 1600e_in1k.py unchanged, run by mmengine's FlexibleRunner (see the 800e sharded config and the README).
_base_ = ['./mae_vision-llama-large-p16_8xb512-amp-coslr-1600e_in1k.py', '../_base_/strategies/fsdp.py']
