# SiT-XL/2 (Ma et al. 2024), the baseline of VisionLLaMA Tables 8-10 (re-run with the released code): the network of
# sit-llama-xlarge-p2_8xb32-400k_in1k-256px.py with DiT blocks, the same recipe. Paper FID-50K: 16.98 (SDE) / 17.83
# (ODE).
_base_ = './sit-llama-xlarge-p2_8xb32-400k_in1k-256px.py'

model = dict(network=dict(block='dit'))
