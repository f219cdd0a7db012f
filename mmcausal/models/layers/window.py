"""Non-overlapping window partition for windowed attention (ViTDet, Li et al. 2022, Sec. 3).

The ``H x W`` token grid is zero-padded at the bottom/right to multiples of the window size and cut
into ``ws x ws`` windows; attention then runs inside each window. Padding tokens are masked out as keys
(:func:`window_key_mask`), so a window that overhangs the image attends to image tokens only; the official
ViTDet/VisionLLaMA code attends to the padding too, which :func:`window_partition` reproduces with
``mask_padding=False``.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import SelfAttention
from .context import TokenLayout


def window_partition(x: Tensor, grid_size: Tuple[int, int], window_size: int) -> Tuple[Tensor, Tuple[int, int]]:
    """``(B, H*W, C)`` tokens -> ``(B * nH * nW, ws * ws, C)`` windows and the padded grid ``(Hp, Wp)``."""
    batch, _, channels = x.shape
    height, width = grid_size
    pad_h, pad_w = -height % window_size, -width % window_size
    x = F.pad(x.view(batch, height, width, channels), (0, 0, 0, pad_w, 0, pad_h))
    padded = (height + pad_h, width + pad_w)
    x = x.view(batch, padded[0] // window_size, window_size, padded[1] // window_size, window_size, channels)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window_size * window_size, channels), padded


def window_unpartition(windows: Tensor, grid_size: Tuple[int, int], padded: Tuple[int, int],
                       window_size: int) -> Tensor:
    """Inverse of :func:`window_partition`: windows -> ``(B, H*W, C)`` with the padding cropped off."""
    channels = windows.shape[-1]
    rows, cols = padded[0] // window_size, padded[1] // window_size
    x = windows.view(-1, rows, cols, window_size, window_size, channels).permute(0, 1, 3, 2, 4, 5)
    x = x.reshape(-1, padded[0], padded[1], channels)[:, :grid_size[0], :grid_size[1]]
    return x.reshape(x.shape[0], grid_size[0] * grid_size[1], channels)


def window_key_mask(grid_size: Tuple[int, int], window_size: int, batch: int,
                    device: Optional[torch.device] = None) -> Optional[Tensor]:
    """Boolean SDPA mask ``(B * nH * nW, 1, 1, ws * ws)``: True for image tokens, False for padding.

    Returns ``None`` when the grid needs no padding (under ``torch.export`` the mask is always built, all True then, so
    the graph serves every grid). Every window holds at least one image token, so no query row is fully masked.
    """
    height, width = grid_size
    if not torch.compiler.is_exporting() and height % window_size == 0 and width % window_size == 0:
        return None
    valid = torch.zeros(height + (-height % window_size), width + (-width % window_size), device=device,
                        dtype=torch.bool)
    valid[:height, :width] = True
    valid = window_partition(valid.view(1, -1, 1), grid_size=valid.shape, window_size=window_size)[0]
    return valid.view(-1, 1, 1, window_size * window_size).repeat(batch, 1, 1, 1)


class WindowedAttention(SelfAttention):
    """:class:`SelfAttention` inside non-overlapping ``ws x ws`` windows of the token grid (ViTDet; the pyramid's
    locally-grouped attention, LSA). Same parameters as the global mixer, so the two are interchangeable per block.

    RoPE uses window-local integer positions ``0..ws-1`` (:meth:`GridRoPE.window_angles`); the local table and
    the padding key mask are built once per forward through the layout's memo.

    Args:
        window_size: tokens per window side.
        mask_padding: hide the zero padding of overhanging windows from the keys (False = the official
            ViTDet/VisionLLaMA behaviour, which attends to it).
        Others: as :class:`SelfAttention`.
    """

    def __init__(self, embed_dims: int, num_heads: int, window_size: int, mask_padding: bool = True,
                 **kwargs) -> None:
        super().__init__(embed_dims, num_heads, **kwargs)
        self.window_size = window_size
        self.mask_padding = mask_padding

    def forward(self, x: Tensor, layout: TokenLayout) -> Tensor:
        """``x`` ``(B, H*W, D)`` in raster order of ``layout.grid`` -> ``(B, H*W, D)``."""
        grid, size = layout.grid, self.window_size
        if layout.num_patches != x.shape[1]:
            raise ValueError(f'Windowed attention needs the (H, W) token grid of the {x.shape[1]} tokens, got '
                             f'grid={grid} (a class token cannot be windowed).')
        windows, padded = window_partition(x, grid, size)
        angles = None if layout.rope is None else \
            layout.memo(('window_angles', size), lambda: layout.rope.window_angles(size, x.device))
        key_mask = layout.memo(('window_key_mask', size, x.shape[0]),
                               lambda: window_key_mask(grid, size, x.shape[0], x.device)) if self.mask_padding else None
        return window_unpartition(self.attend(windows, angles, key_mask), grid, padded, size)

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, window_size={self.window_size}, mask_padding={self.mask_padding}'
