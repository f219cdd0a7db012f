# DiT-L/4 (Peebles & Xie 2023), the baseline of VisionLLaMA Table 1: the network of
# dit-llama-large-p4_8xb32-400k_in1k-256px.py with DiT blocks (GELU-tanh MLP, sin-cos position table, no RoPE), the same
# recipe. Paper FID-50K: 44.37 without / 22.51 with CFG 1.5.
_base_ = './dit-llama-large-p4_8xb32-400k_in1k-256px.py'

model = dict(network=dict(block='dit'))
