# Tiny twin of illama-small-p16_ca-pool_32xb128_in1k.py: the iLLaMA-nano twin (../illama/illama-nano-p8_1xb32-30e_
# shapes-64px.py: same data, schedule, soft mask and seed) with the class-attention tail as its pooling. The three
# pooling choices of the comparison in README.md differ only in these lines:
#   post-sequence [cls]: the iLLaMA twin itself;
#   GAP:                 the iLLaMA twin with --cfg-options model.backbone.out_type=avg_featmap;
#   class-attention:     this config.
_base_ = ['../illama/illama-nano-p8_1xb32-30e_shapes-64px.py']

model = dict(
    backbone=dict(out_type='featmap'),
    neck=dict(_delete_=True, type='ClassAttentionPool', embed_dims=64, num_heads=2, num_layers=2,
              layer_scale_init_value=0.1))
