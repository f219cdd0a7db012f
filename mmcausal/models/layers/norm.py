"""Normalisation layers.

``RMSNorm`` (Zhang & Sennrich 2019; used by LLaMA, iLLaMA, Mamba): ``y = x / sqrt(mean(x^2) + eps) * w``.
We register torch's own :class:`torch.nn.RMSNorm` so configs can say ``norm_cfg=dict(type='RMSNorm',
eps=1e-6)`` next to mmcv's ``'LN'``, and build both with mmpretrain's ``build_norm_layer``.
"""
from mmpretrain.models.utils import build_norm_layer
from torch import nn

from mmcausal.registry import MODELS

MODELS.register_module('RMSNorm', module=nn.RMSNorm)

__all__ = ['build_norm_layer']
