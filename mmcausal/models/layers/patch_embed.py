"""Patch embedding for any image size: mmcv's ``PatchEmbed`` (a ``kernel = stride`` convolution) behind a bottom/right
zero padding to whole patches whose amounts stay expressions of the input's size under ``torch.export``."""
import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import PatchEmbed
from torch import Tensor, nn


class CornerPadding(nn.Module):
    """``(B, C, H, W) -> (B, C, H + (-H mod s), W + (-W mod s))``: zeros at the bottom/right up to multiples of
    ``stride``.

    mmcv's ``AdaptivePadding`` does the same with ``math.ceil`` and an ``if pad > 0`` on the size: an export traced
    at a multiple of the stride records that branch as a condition and drops the padding, and its graph then fails
    (or cuts the image) at other sides. Here the amounts are symbolic (``-H mod s``) and the export always pads (by 0
    at multiples); the eager path keeps the skip.
    """

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride

    def forward(self, x: Tensor) -> Tensor:
        pad_h, pad_w = -x.shape[-2] % self.stride, -x.shape[-1] % self.stride
        if torch.compiler.is_exporting() or pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h))
        return x

    def extra_repr(self) -> str:
        return f'stride={self.stride}'


def build_patch_embed(in_channels: int, embed_dims: int, patch_size: int, **kwargs) -> PatchEmbed:
    """mmcv's ``PatchEmbed`` with ``kernel_size = stride = patch_size``, ``padding='corner'`` (any input size: zero
    padding at the bottom/right to whole patches, by :class:`CornerPadding`); ``kwargs`` go to ``PatchEmbed``
    (``norm_cfg``, ``input_size``, ``bias``, ...). Same parameters and outputs as the mmcv module."""
    embed = PatchEmbed(in_channels=in_channels, embed_dims=embed_dims, conv_type='Conv2d', kernel_size=patch_size,
                       stride=patch_size, padding='corner', **kwargs)
    embed.adaptive_padding = CornerPadding(patch_size)
    return embed
