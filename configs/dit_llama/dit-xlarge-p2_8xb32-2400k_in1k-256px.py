# DiT-XL/2 (Peebles & Xie 2023), the baseline of VisionLLaMA Table 1: the network of
# dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py with DiT blocks (GELU-tanh MLP, sin-cos position table, no RoPE), the
# same recipe. Paper FID-50K: 10.67 without CFG.
_base_ = './dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py'

model = dict(network=dict(block='dit'))
