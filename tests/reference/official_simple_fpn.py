"""An independent re-statement of the *official* De-focus detection neck (``SimpleFPN`` with ``LN2d``), used only as a
test oracle for the checkpoint converter.

Written from the official code (De-focus ``detection/``: ``simple_fpn.py``, the DINO configs), not from mmcausal:
attribute names ``fpn1`` (ConvT -> LN2d -> GELU -> ConvT), ``fpn2`` (ConvT), ``fpn3`` (identity), ``fpn4`` (max pool
2), and per level a 1x1 and a 3x3 mmcv ``ConvModule`` (``lateral_convs`` / ``fpn_convs``) with an LN2d norm and no
activation.
Every LN2d is built as the released code builds it, through mmcv (``build_norm_layer`` / ``ConvModule``) from
``dict(type=LN2d, requires_grad=True)``: so the norms' state-dict name is whatever mmcv infers for a norm class
called ``LN2d`` (not a subclass of ``nn.LayerNorm``), and their eps is whatever mmcv gives a config without one
(the ``LN2d`` class default 1e-6 is overridden: mmcv 2.1 sets 1e-5).
"""
import torch
from mmcv.cnn import ConvModule, build_norm_layer
from torch import nn


class LN2d(nn.Module):
    """LayerNorm over the channels of a (B, C, H, W) map (the official ``LN2d``: class default eps 1e-6)."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(1, keepdim=True)
        var = (x - mean).pow(2).mean(1, keepdim=True)
        return self.weight[:, None, None] * (x - mean) / torch.sqrt(var + self.eps) + self.bias[:, None, None]


class SimpleFPNOfficial(nn.Module):
    """P2-P5 (strides 4-32) from one stride-16 map of ``channels`` channels; ``num_outs`` = 4, no extra levels."""

    def __init__(self, channels, out_channels=256):
        super().__init__()
        norm_cfg = dict(type=LN2d, requires_grad=True)
        self.fpn1 = nn.Sequential(
            nn.ConvTranspose2d(channels, channels // 2, 2, 2), build_norm_layer(norm_cfg, channels // 2)[1], nn.GELU(),
            nn.ConvTranspose2d(channels // 2, channels // 4, 2, 2))
        self.fpn2 = nn.Sequential(nn.ConvTranspose2d(channels, channels // 2, 2, 2))
        self.fpn3 = nn.Sequential(nn.Identity())
        self.fpn4 = nn.Sequential(nn.MaxPool2d(kernel_size=2, stride=2))
        in_channels = [channels // 4, channels // 2, channels, channels]
        self.lateral_convs = nn.ModuleList(
            ConvModule(c, out_channels, 1, norm_cfg=norm_cfg, act_cfg=None, inplace=False) for c in in_channels)
        self.fpn_convs = nn.ModuleList(
            ConvModule(out_channels, out_channels, 3, padding=1, norm_cfg=norm_cfg, act_cfg=None, inplace=False)
            for _ in in_channels)

    def forward(self, x):
        inputs = [self.fpn1(x), self.fpn2(x), self.fpn3(x), self.fpn4(x)]
        return tuple(fpn(lateral(f)) for f, lateral, fpn in zip(inputs, self.lateral_convs, self.fpn_convs))
