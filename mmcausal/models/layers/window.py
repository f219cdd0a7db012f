"""Non-overlapping window partition for windowed attention (ViTDet, Li et al. 2022, Sec. 3).

The ``H x W`` token grid is cut into ``ws x ws`` windows from the top left; attention runs inside each window.
Where ``ws`` does not divide the grid, the windows at the bottom/right overhang it. The official
ViTDet/VisionLLaMA code zero-pads the grid and attends to the padding too (``mask_padding=False``:
:func:`window_partition` with the padding). With the padding masked out of the keys (the default) a window that
overhangs the image attends to its image tokens only, which is attention inside the smaller window that the image
leaves of it: :func:`window_regions` splits the grid into the bands of whole and of cut windows, and each band
runs without padding or mask (at 1024 px, 64 x 64 tokens in 14 x 14 windows, padding would add 20 % tokens).
The padded and masked form (:func:`window_key_mask`) serves ``torch.export`` (one graph for every grid) and
:func:`~.attention.explicit_attention_mode` (one ``ws x ws`` map per window for the probe).
"""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .attention import SelfAttention, explicit_attention_requested
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


def window_regions(grid_size: Tuple[int, int], window_size: int) -> List[List[Tuple[slice, slice, Tuple[int, int]]]]:
    """The grid cut into up to 2 x 2 regions of equal windows, as rows of ``(row slice, column slice, window
    (h, w))``: whole ``ws x ws`` windows, then the cut ones of the last column / row (``H mod ws`` or ``W mod ws``
    wide). Concatenating each row of regions along the width and the rows along the height gives the grid back."""
    def bands(length: int) -> List[Tuple[slice, int]]:
        whole = length - length % window_size
        return [(band, size) for band, size in ((slice(0, whole), window_size), (slice(whole, length),
                                                                                length % window_size))
                if band.stop > band.start]

    return [[(rows, cols, (height, width)) for cols, width in bands(grid_size[1])]
            for rows, height in bands(grid_size[0])]


def region_partition(grid: Tensor, rows: slice, cols: slice, window: Tuple[int, int]) -> Tensor:
    """The ``window``-sized windows tiling ``grid[:, rows, cols]`` of a ``(B, H, W, C)`` grid ->
    ``(B * n_windows, h * w, C)``, each window in raster order (one copy)."""
    height, width = window
    region = grid[:, rows, cols]
    region = region.unflatten(1, (-1, height)).unflatten(3, (-1, width)).permute(0, 1, 3, 2, 4, 5)
    return region.reshape(-1, height * width, grid.shape[-1])


def region_unpartition(windows: Tensor, batch: int, region_size: Tuple[int, int], window: Tuple[int, int]) -> Tensor:
    """Inverse of :func:`region_partition`: ``(B * n_windows, h * w, C)`` -> the region ``(B, rows, cols, C)``."""
    height, width = window
    windows = windows.view(batch, region_size[0] // height, region_size[1] // width, height, width, -1)
    return windows.permute(0, 1, 3, 2, 4, 5).reshape(batch, *region_size, windows.shape[-1])


class WindowedAttention(SelfAttention):
    """:class:`SelfAttention` inside non-overlapping ``ws x ws`` windows of the token grid (ViTDet; the pyramid's
    locally-grouped attention, LSA). Same parameters as the global mixer, so the two are interchangeable per block.

    RoPE uses window-local integer positions ``0..ws-1`` (:meth:`GridRoPE.window_angles`); the local tables (and
    the padding key mask of the padded form) are built once per forward through the layout's memo. With
    ``mask_padding`` the cut windows at the bottom/right run at their own size (:func:`window_regions`), the same
    math as the padded, masked windows without the padding's tokens, copies and mask.

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
        if self.mask_padding and not (torch.compiler.is_exporting() or explicit_attention_requested()):
            return self._attend_in_regions(x, layout)
        windows, padded = window_partition(x, grid, size)
        key_mask = layout.memo(('window_key_mask', size, x.shape[0]),
                               lambda: window_key_mask(grid, size, x.shape[0], x.device)) if self.mask_padding else None
        return window_unpartition(self.attend(windows, self._window_angles(layout, (size, size), x.device), key_mask),
                                  grid, padded, size)

    def _attend_in_regions(self, x: Tensor, layout: TokenLayout) -> Tensor:
        """Attention in the unpadded windows of every :func:`window_regions` region, ``(B, H*W, D)`` -> same."""
        batch, grid = x.shape[0], x.view(x.shape[0], *layout.grid, x.shape[-1])
        rows = []
        for row in window_regions(layout.grid, self.window_size):
            parts = []
            for row_slice, col_slice, window in row:
                windows = self.attend(region_partition(grid, row_slice, col_slice, window),
                                      self._window_angles(layout, window, x.device))
                size = (row_slice.stop - row_slice.start, col_slice.stop - col_slice.start)
                parts.append(region_unpartition(windows, batch, size, window))
            rows.append(torch.cat(parts, dim=2) if len(parts) > 1 else parts[0])
        out = torch.cat(rows, dim=1) if len(rows) > 1 else rows[0]
        return out.view(batch, layout.num_patches, -1)

    @staticmethod
    def _window_angles(layout: TokenLayout, window: Tuple[int, int], device: torch.device) -> Optional[Tensor]:
        """Window-local RoPE angles of a ``window = (h, w)`` window (memoised per forward); None without RoPE."""
        if layout.rope is None:
            return None
        return layout.memo(('window_angles', window), lambda: layout.rope.window_angles(window, device))

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, window_size={self.window_size}, mask_padding={self.mask_padding}'
