# SiT-L/2 (Ma et al. 2024), the baseline of VisionLLaMA Tables 8-10 (re-run with the released code): the network of
# sit-llama-large-p2_8xb32-400k_in1k-256px.py with DiT blocks, the same recipe. Paper FID-50K: 19.34 (SDE) / 20.14
# (ODE).
_base_ = './sit-llama-large-p2_8xb32-400k_in1k-256px.py'

model = dict(network=dict(block='dit'))
