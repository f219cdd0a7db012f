# MAE pre-training of VisionLLaMA-L (official 11008-wide SwiGLU: 914M parameters as a classifier, 940M with the MAE
# decoder), 800 epochs, sharded with
# FSDP: mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k.py unchanged (batch 8 x 512, AMP fp16 with a dynamic,
# here sharded, loss scale), run by mmengine's FlexibleRunner with one FSDP unit per block (../_base_/strategies).
# Launch with torchrun (docs/sharding.md). Checkpoints are sharded directories; for
# fine-tuning, consolidate the last one: tools/model_converters/consolidate_sharded_checkpoint.py.
_base_ = ['./mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k.py', '../_base_/strategies/fsdp.py']
