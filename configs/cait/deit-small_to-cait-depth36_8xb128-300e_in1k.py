# Table 8 row 4 of the CaiT paper (Touvron et al. 2021, "Going deeper with Image Transformers"): "+ Depth [36
# blocks]", 69.9 top-1, training failed (64M, 13.8 GFLOPs). The previous rung (deit-small_to-cait-talking-heads, 80.5)
# with 36 blocks. Stochastic depth stays DeiT's (linear to 0.1): the table adapts it two rows later ("See Table 1 for
# adapting stochastic depth before adding LayerScale").
_base_ = './deit-small_to-cait-talking-heads_8xb128-300e_in1k.py'

model = dict(backbone=dict(arch=dict(num_layers=36)))
