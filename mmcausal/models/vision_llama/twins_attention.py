"""The local and global attention of VisionLLaMA's windowed and pyramid models, with the RoPE tables they derive
from the backbone's :class:`~mmcausal.models.layers.GridRoPE`.

Windowed attention (ViTDet, Li et al. 2022, Sec. 3; the pyramid's locally-grouped attention, LSA, Twins, Chu et al.
2021): the ``H x W`` token grid is cut into ``ws x ws`` windows from the top left; attention runs inside each window
with window-local integer positions (:func:`window_angles`). Where ``ws`` does not divide the grid, the windows at the
bottom/right overhang it. The official ViTDet/VisionLLaMA code zero-pads the grid and attends to the padding too
(``mask_padding=False``: :func:`window_partition` with the padding). With the padding masked out of the keys (the
default) a window that overhangs the image attends to its image tokens only, which is attention inside the smaller
window that the image leaves of it: :func:`window_regions` splits the grid into the bands of whole and of cut
windows, and each band runs without padding or mask (at 1024 px, 64 x 64 tokens in 14 x 14 windows, padding would
add 20 % tokens). The padded and masked form (:func:`window_key_mask`) serves ``torch.export`` (one graph for every
grid) and :func:`~mmcausal.models.layers.explicit_attention_mode` (one ``ws x ws`` map per window for the probe).

Global sub-sampled attention (GSA; Twins; the pyramid VisionLLaMA, Chu et al. 2024 Sec. 3.2): queries are every token
of the grid; keys and values come from the grid reduced by an ``sr x sr`` strided convolution (+ LayerNorm), so
attention costs ``O(N * N / sr^2)``::

    q = W_q x,   x' = LN(Conv_{k=s=sr}(x)),   [k | v] = W_kv x',   out = W_o softmax(R(q) R(k)^T / sqrt(d)) v


with 2D RoPE ``R`` on queries and keys at their own positions (:func:`subsampled_key_angles`). A grid that is not a
multiple of ``sr`` is zero-padded at the bottom/right before the convolution (the official code floors instead and
fails once the key count and its position table disagree). ``sr = 1`` is plain global attention with separate
``q`` / ``kv`` projections and no reduction.
"""
from typing import List, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from ..layers import (
    EXPLICIT_ATTENTION,
    AttentionConfigError,
    AttentionProbe,
    GridRoPE,
    RopeConfigError,
    SelfAttention,
    TokenLayout,
    apply_rotary,
    build_norm_layer,
    check_head_split,
    grid_positions,
    masked_attention,
)

GSA_KEY_POSITIONS = ('fixed', 'official')


def window_angles(rope: GridRoPE, window_size: Union[int, Tuple[int, int]],
                  device: Optional[torch.device] = None) -> Tensor:
    """Window-local angles ``(h*w, hd/2)`` of an ``h x w`` window (``ws``: ``ws x ws``): integer positions
    ``0..h-1`` / ``0..w-1`` inside the window in raster order, never auto-scaled (ViTDet and the pyramid LSA)."""
    if rope.mode == '1d':
        raise RopeConfigError('Windowed attention needs 2D positions; use rope_mode="2d" or "as2d".')
    window = (window_size, window_size) if isinstance(window_size, int) else tuple(window_size)
    return rope.angles(grid_positions(window, device=device))


def subsampled_key_angles(rope: GridRoPE, grid: Tuple[int, int], sr_ratio: int, key_grid: Tuple[int, int],
                          key_pos: str = 'fixed', device: Optional[torch.device] = None) -> Tensor:
    """Key angles of sub-sampled attention (pyramid GSA): keys are the ``sr x sr`` cells of the query grid.

    ``'fixed'``: key ``(i, j)`` of the ``key_grid`` sits at the centre of its cell, ``(sr i + (sr-1)/2,
    sr j + (sr-1)/2)``. ``'official'`` reproduces the released code: the flat key index ``m`` is unflattened
    with the *query* width ``W`` and offset ``1 - 1/sr``, ``(1 - 1/sr + sr (m // W), 1 - 1/sr + sr (m % W))``
    (wrong for ``sr > 1``, but what the released weights learnt; the official code sizes the table
    ``H W // sr^2``, which is the key count whenever ``sr`` divides the grid, and fails otherwise, so here
    it has one row per key). Both are then scaled like the queries (:meth:`GridRoPE.scale` of ``grid``).

    Returns:
        ``(M, hd/2)`` with ``M`` the number of keys.
    """
    if key_pos not in GSA_KEY_POSITIONS:  # the mixer checked its own setting when it was built
        check_choice('gsa_key_pos', key_pos, GSA_KEY_POSITIONS, RopeConfigError)
    if rope.mode == '1d':
        raise RopeConfigError('Sub-sampled attention needs 2D positions; use rope_mode="2d" or "as2d".')
    offset, width = ((sr_ratio - 1) / 2, key_grid[1]) if key_pos == 'fixed' else (1 - 1 / sr_ratio, grid[1])
    index = torch.arange(key_grid[0] * key_grid[1], device=device)
    if torch.compiler.is_exporting():  # a symbolic width as a tensor: ONNX has no remainder by a symbolic scalar
        width = torch.scalar_tensor(width, dtype=index.dtype, device=device)
    scale_y, scale_x = rope.scale(grid)
    positions = torch.stack(((offset + sr_ratio * (index // width)) * scale_y,
                             (offset + sr_ratio * (index % width)) * scale_x), dim=-1)
    return rope.angles(positions)


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

    RoPE uses window-local integer positions ``0..ws-1`` (:func:`window_angles`); the local tables (and
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
        if self.mask_padding and not (torch.compiler.is_exporting() or EXPLICIT_ATTENTION.get()):
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
        return layout.memo(('window_angles', window), lambda: window_angles(layout.rope, window, device))

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, window_size={self.window_size}, mask_padding={self.mask_padding}'


class SubsampledAttention(nn.Module):
    """GSA token mixer; parameter names ``q``, ``kv``, ``sr``, ``norm``, ``proj`` are the official ones.

    Args:
        embed_dims: token width ``D``.
        num_heads: attention heads.
        sr_ratio: key/value reduction per side (1 = no reduction).
        key_pos: RoPE positions of the keys, ``'fixed'`` (cell centres) or ``'official'`` (the released
            weights' formula), see :func:`subsampled_key_angles`.
        qkv_bias: biases of ``q`` and ``kv``.
        norm_cfg: norm of the reduced tokens (LayerNorm eps 1e-5 in the official code).
    """

    def __init__(self, embed_dims: int, num_heads: int, sr_ratio: int = 1, key_pos: str = 'fixed',
                 qkv_bias: bool = True, norm_cfg: Optional[dict] = None) -> None:
        super().__init__()
        self.head_dim = check_head_split(embed_dims, num_heads)
        self.num_heads = num_heads
        self.sr_ratio = sr_ratio
        self.key_pos = check_choice('gsa_key_pos', key_pos, GSA_KEY_POSITIONS, AttentionConfigError)
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, 2 * embed_dims, bias=qkv_bias)
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, kernel_size=sr_ratio, stride=sr_ratio)
            self.norm = build_norm_layer(norm_cfg or dict(type='LN', eps=1e-5), embed_dims)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.attn_probe = AttentionProbe()

    def reduce(self, x: Tensor, grid: tuple) -> tuple:
        """``(B, H*W, D)`` -> reduced tokens ``(B, M, D)`` and their grid ``(ceil(H/sr), ceil(W/sr))``."""
        if self.sr_ratio == 1:
            return x, grid
        batch, _, dims = x.shape
        feature = x.transpose(1, 2).reshape(batch, dims, *grid)  # a view: torch's conv reads its strides
        feature = F.pad(feature, (0, -grid[1] % self.sr_ratio, 0, -grid[0] % self.sr_ratio))
        reduced = self.sr(feature)
        return self.norm(reduced.flatten(2).transpose(1, 2)), tuple(reduced.shape[-2:])

    def forward(self, x: Tensor, layout: TokenLayout) -> Tensor:
        """``x`` ``(B, H*W, D)`` in raster order of ``layout.grid`` -> ``(B, H*W, D)``."""
        batch, num_tokens, dims = x.shape
        if layout.num_patches != num_tokens:
            raise ValueError(f'Sub-sampled attention needs the (H, W) grid of the {num_tokens} tokens, got '
                             f'grid={layout.grid} (a class token cannot be sub-sampled).')
        reduced, key_grid = self.reduce(x, layout.grid)
        q = self.q(x).view(batch, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(reduced).view(batch, -1, 2, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if layout.rope is not None:
            key_angles = layout.memo(
                ('subsampled_keys', self.sr_ratio, key_grid, self.key_pos),
                lambda: subsampled_key_angles(layout.rope, layout.grid, self.sr_ratio, key_grid, self.key_pos,
                                                          x.device))
            q, k = apply_rotary(q, layout.angles), apply_rotary(k, key_angles)
        out = masked_attention(q, k, v, 'bidirectional', probe=self.attn_probe)
        return self.proj(out.transpose(1, 2).reshape(batch, num_tokens, dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, sr_ratio={self.sr_ratio}, key_pos={self.key_pos!r}'
