"""Absolute position embeddings that follow the actual patch grid: resizing a learnt table, and the fixed 2-D
sin-cos table of DiT."""
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from mmpretrain.models.utils import resize_pos_embed as _resize_cls_first
from torch import Tensor

from mmcausal.utils.validation import ConfigValueError
from .grid_rope import grid_positions


def resize_pos_embed(pos_embed: Tensor, src_shape: Sequence[int], dst_shape: Sequence[int],
                     cls_position: Optional[str] = 'first', mode: str = 'bicubic') -> Tensor:
    """Resize a ``(1, h*w [+1], D)`` table from grid ``src_shape`` to ``dst_shape`` (non-square aware).

    The patch rows are interpolated as an image (``align_corners=False``); the class-token row, first or
    last (``cls_position``; ``None`` = no class row), is kept as it is. Wraps mmpretrain's
    ``resize_pos_embed``, which only knows leading extra tokens. Under ``torch.export`` (ONNX export) the table is
    always interpolated, so a graph with a symbolic grid resizes it to the input's grid (at the same size the
    interpolation is exact: every sample falls on a source row).
    """
    if torch.compiler.is_exporting():
        return _interpolate_patch_rows(pos_embed, src_shape, dst_shape, cls_position, mode)
    if cls_position != 'last':
        return _resize_cls_first(pos_embed, src_shape, dst_shape, mode=mode,
                                 num_extra_tokens=int(cls_position == 'first'))
    moved = torch.cat((pos_embed[:, -1:], pos_embed[:, :-1]), dim=1)
    resized = _resize_cls_first(moved, src_shape, dst_shape, mode=mode, num_extra_tokens=1)
    return torch.cat((resized[:, 1:], resized[:, :1]), dim=1)


def _interpolate_patch_rows(pos_embed: Tensor, src_shape: Sequence[int], dst_shape: Sequence[int],
                            cls_position: Optional[str], mode: str) -> Tensor:
    """:func:`resize_pos_embed` without the same-size shortcut (a branch on the grid that a graph cannot keep)."""
    start, stop = (1, None) if cls_position == 'first' else (0, -1 if cls_position == 'last' else None)
    patches = pos_embed[:, start:stop].unflatten(1, tuple(src_shape)).permute(0, 3, 1, 2)
    resized = F.interpolate(patches.float(), size=tuple(dst_shape), mode=mode, align_corners=False)
    resized = resized.flatten(2).transpose(1, 2).to(pos_embed.dtype)
    if cls_position is None:
        return resized
    cls = pos_embed[:, :1] if cls_position == 'first' else pos_embed[:, -1:]
    return torch.cat((cls, resized) if cls_position == 'first' else (resized, cls), dim=1)


def sincos_pos_embed_2d(grid: Tuple[int, int], embed_dims: int, device: Optional[torch.device] = None) -> Tensor:
    """DiT's fixed 2-D sin-cos table ``(H*W, D)`` (fp32) of a row-major ``(H, W)`` grid.

    Token ``n`` sits at column ``x = n % W`` and row ``y = n // W``; with ``w_k = 10000^(-k / (D/4))``, ``k < D/4``,
    its row is ``[sin(x w), cos(x w), sin(y w), cos(y w)]`` (the column in the first half). Computed in fp64.
    """
    if embed_dims % 4:
        raise ConfigValueError(f'The sin-cos table needs embed_dims divisible by 4, got {embed_dims}.')
    quarter = embed_dims // 4
    freqs = 10000. ** -(torch.arange(quarter, dtype=torch.float64, device=device) / quarter)
    positions = grid_positions(grid, device=device).double()
    along_x = positions[:, 1:2] * freqs
    along_y = positions[:, 0:1] * freqs
    return torch.cat((along_x.sin(), along_x.cos(), along_y.sin(), along_y.cos()), dim=1).float()
