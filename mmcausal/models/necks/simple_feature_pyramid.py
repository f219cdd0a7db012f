"""ViTDet-style simple feature pyramid (Li et al. 2022, "Exploring Plain Vision Transformer Backbones for
Object Detection", Sec. 3): multi-scale maps built from the single stride-16 map of a plain backbone."""
from typing import List, Optional, Sequence, Tuple

import torch.nn.functional as F
from mmengine.model import BaseModule
from mmpretrain.models.utils import LayerNorm2d
from torch import Tensor, nn

from mmcausal.registry import MODELS

LN2D_EPS = 1e-6  # ViTDet's LayerNorm2d (detectron2 `LayerNorm`); mmdet's ViTDet project ends at mmcv's 1e-5
# ViTDet's conv init in the neck (mmcv `ConvModule`: Caffe2 "MSRAFill"): kaiming normal, fan_out, ReLU gain, bias 0.
# Only `Conv2d` is matched: the transposed convs keep PyTorch's default init, as in ViTDet.
CONV_INIT = dict(type='Kaiming', layer='Conv2d', mode='fan_out', nonlinearity='relu', distribution='normal', bias=0.)


def _rescale_branch(in_channels: int, scale: float, eps: float) -> Tuple[nn.Module, int]:
    """Stride-16 map -> ``scale`` times its resolution; returns the branch and its output channels."""
    if scale == 4:
        mid, out = in_channels // 2, in_channels // 4
        return nn.Sequential(
            nn.ConvTranspose2d(in_channels, mid, 2, stride=2), LayerNorm2d(mid, eps=eps), nn.GELU(),
            nn.ConvTranspose2d(mid, out, 2, stride=2)), out
    if scale == 2:
        return nn.ConvTranspose2d(in_channels, in_channels // 2, 2, stride=2), in_channels // 2
    if scale == 1:
        return nn.Identity(), in_channels
    if scale == 0.5:
        return nn.MaxPool2d(2, stride=2), in_channels
    raise ValueError(f'Unsupported pyramid scale {scale}; choose from 4, 2, 1, 0.5.')


def _output_conv(in_channels: int, out_channels: int, eps: float) -> nn.Module:
    """1x1 conv + LN2d, then 3x3 conv + LN2d (no biases), as in ViTDet."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 1, bias=False), LayerNorm2d(out_channels, eps=eps),
        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), LayerNorm2d(out_channels, eps=eps))


@MODELS.register_module()
class SimpleFeaturePyramid(BaseModule):
    """Build ``len(scales)`` maps (strides 4/8/16/32 for scales 4/2/1/0.5) from the last backbone map, plus
    ``num_outs - len(scales)`` extra levels by stride-2 subsampling of the coarsest one (P6 for RPN).

    Args:
        in_channels: channels of the backbone map (``embed_dims``).
        out_channels: channels of every output level.
        scales: resolution factors relative to the input map.
        num_outs: total number of outputs (>= ``len(scales)``).
        norm_eps: eps of every LayerNorm2d: ViTDet's 1e-6 by default; necks of mmdet's ViTDet project (the
            released De-focus detector's, the official VisionLLaMA code's) have 1e-5 (their LN2d is built by mmcv's
            ``build_norm_layer``, which sets eps 1e-5 when the config gives none).
        init_cfg: defaults to ViTDet's conv init (:data:`CONV_INIT`).

    Input: a tuple whose last element is ``(B, in_channels, H/16, W/16)``; output: tuple of
    ``(B, out_channels, H/s, W/s)`` maps, finest first.
    """

    def __init__(self, in_channels: int, out_channels: int, scales: Sequence[float] = (4, 2, 1, 0.5),
                 num_outs: int = 5, norm_eps: float = LN2D_EPS, init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=CONV_INIT if init_cfg is None else init_cfg)
        if num_outs < len(scales):
            raise ValueError(f'num_outs ({num_outs}) must be >= the number of scales ({len(scales)}).')
        if not norm_eps > 0:
            raise ValueError(f'norm_eps must be a positive number, got {norm_eps!r}.')
        self.num_outs = num_outs
        self.branches = nn.ModuleList()
        self.output_convs = nn.ModuleList()
        for scale in scales:
            branch, channels = _rescale_branch(in_channels, scale, norm_eps)
            self.branches.append(branch)
            self.output_convs.append(_output_conv(channels, out_channels, norm_eps))

    def forward(self, inputs: Sequence[Tensor]) -> Tuple[Tensor, ...]:
        feature = inputs[-1]
        outs: List[Tensor] = [conv(branch(feature)) for branch, conv in zip(self.branches, self.output_convs)]
        while len(outs) < self.num_outs:
            outs.append(F.max_pool2d(outs[-1], kernel_size=1, stride=2))
        return tuple(outs)
