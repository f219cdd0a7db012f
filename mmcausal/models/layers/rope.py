"""Rotary position embedding (RoPE, Su et al. 2021), the position family shared by all backbones.

A rotary embedding is split in two steps so every variant shares the rotation:

1. an *angle table* ``(..., N, head_dim // 2)`` in fp32, one angle per token and channel pair,
   computed from the actual token positions at forward time (never from a constructor-time length);
2. :func:`apply_rotary`, which rotates each adjacent channel pair ``(x[2i], x[2i+1])`` of q and k by its
   angle (the "interleaved" layout of Meta's LLaMA and of iLLaMA's released weights).

With angles ``t * w_i`` the score ``<R(t) q, R(s) k>`` depends on ``t - s`` only.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice


def rope_frequencies(num_pairs: int, theta: float = 10000.) -> Tensor:
    """Frequencies ``w_i = theta^(-i / num_pairs)`` for ``i = 0..num_pairs-1`` (RoFormer Eq. 15).

    For a 1D RoPE over ``head_dim`` channels ``num_pairs = head_dim // 2``, i.e. ``w_i = theta^(-2i/head_dim)``.
    """
    exponents = torch.arange(num_pairs, dtype=torch.float64) / num_pairs
    return (theta ** -exponents).float()


def apply_rotary(x: Tensor, angles: Tensor) -> Tensor:
    """Rotate adjacent channel pairs of ``x`` by ``angles``.

    Args:
        x: ``(B, heads, N, head_dim)`` queries or keys.
        angles: ``(N, head_dim // 2)`` shared by the batch, or ``(B, N, head_dim // 2)`` per sample.

    Returns:
        Tensor like ``x``: ``(x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)`` per pair, computed in
        fp32 and cast back to ``x.dtype``.
    """
    if angles.dim() == 3:
        angles = angles.unsqueeze(1)  # broadcast over heads
    cos, sin = angles.cos(), angles.sin()
    pairs = x.float().unflatten(-1, (-1, 2))
    x0, x1 = pairs.unbind(-1)
    rotated = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return rotated.flatten(-2).type_as(x)


class RotaryEmbedding1D(nn.Module):
    """1D RoPE angle table: ``angles[t, i] = position_t * w_i``.

    Args:
        head_dim: channels per head (even).
        theta: base of the frequency ladder (10000 in LLaMA/iLLaMA).
    """

    def __init__(self, head_dim: int, theta: float = 10000.) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f'RoPE needs an even head_dim, got {head_dim}.')
        self.register_buffer('freqs', rope_frequencies(head_dim // 2, theta), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """``positions`` ``(N,)`` or ``(B, N)`` (any numeric dtype) -> angles ``(..., N, head_dim // 2)`` fp32."""
        return positions.float().unsqueeze(-1) * self.freqs


ROPE_MODES = ('1d', '2d', 'as2d')
AS2D_SCALINGS = ('isotropic', 'per_axis')


class RopeConfigError(UserInputError, ValueError):
    """An unknown or invalid RoPE setting in a config (the message lists the valid values)."""


def check_rope_mode(rope_mode: str) -> str:
    """Return ``rope_mode`` or raise a :class:`RopeConfigError` listing the valid modes."""
    return check_choice('rope_mode', rope_mode, ROPE_MODES, RopeConfigError)


def check_as2d_scaling(scaling: str) -> str:
    """Return ``scaling`` or raise a :class:`RopeConfigError` listing :data:`AS2D_SCALINGS` (``'isotropic'`` is
    the paper's Eq. 4 and the official code)."""
    return check_choice('as2d_scaling', scaling, AS2D_SCALINGS, RopeConfigError)


def grid_positions(grid_size: Tuple[int, int], scale: Tuple[float, float] = (1., 1.),
                   device: Optional[torch.device] = None) -> Tensor:
    """Row-major 2D token positions ``(H * W, 2)`` as ``(y * scale_y, x * scale_x)``, fp32.

    Token ``n`` of an ``H x W`` grid sits at row ``y = n // W`` and column ``x = n % W``.
    """
    height, width = grid_size
    rows = torch.arange(height, device=device, dtype=torch.float32) * scale[0]
    cols = torch.arange(width, device=device, dtype=torch.float32) * scale[1]
    return torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1).reshape(-1, 2)


def auto_scale(grid_size: Tuple[int, int], anchor: Tuple[int, int], scaling: str) -> Tuple[float, float]:
    """AS2DRoPE position scale ``(s_y, s_x)`` of an ``(H, W)`` grid for the anchor grid ``(B_h, B_w)``.

    * ``'isotropic'`` (VisionLLaMA Eq. 4, ``R_{i B/H, j B/H}``, and the official code, ``s = 224 / H_px``):
      one scale ``s = B_h / H`` from the height for both axes, so the aspect ratio of the grid is kept and
      the rows span the anchor's range ``[0, B_h)``.
    * ``'per_axis'``: ``(B_h / H, B_w / W)``, so both axes span the anchor's range (a non-square grid is
      squeezed onto the anchor's shape).

    For a square grid and anchor both give ``B / H``; at ``H x W = B_h x B_w`` the scale is 1 and
    AS2DRoPE is exactly 2D RoPE.
    """
    if check_as2d_scaling(scaling) == 'isotropic':
        return anchor[0] / grid_size[0], anchor[0] / grid_size[0]
    return anchor[0] / grid_size[0], anchor[1] / grid_size[1]


class RotaryEmbedding2D(nn.Module):
    """2D RoPE angle table (VisionLLaMA Sec. 3.1, channel layout of the official code).

    With ``d = head_dim`` and ``w_k = theta^(-4k/d)`` for ``k < d/4``, channel pair ``2k`` (channels
    ``4k, 4k+1``) turns by ``x * w_k`` and pair ``2k+1`` (channels ``4k+2, 4k+3``) by ``y * w_k``:
    ``angles[n] = [x w_0, y w_0, x w_1, y w_1, ...]``. The score ``<R(y,x) q, R(y',x') k>`` then depends on
    ``(y - y', x - x')`` only, and one table serves every head.

    Args:
        head_dim: channels per head (multiple of 4).
        theta: frequency base (10000 in VisionLLaMA).
    """

    def __init__(self, head_dim: int, theta: float = 10000.) -> None:
        super().__init__()
        if head_dim % 4:
            raise ValueError(f'2D RoPE needs head_dim divisible by 4, got {head_dim}.')
        self.register_buffer('freqs', rope_frequencies(head_dim // 4, theta), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """``positions`` ``(..., N, 2)`` as ``(y, x)`` -> angles ``(..., N, head_dim // 2)`` fp32."""
        positions = positions.float()
        along_x = positions[..., 1:2] * self.freqs
        along_y = positions[..., 0:1] * self.freqs
        return torch.stack((along_x, along_y), dim=-1).flatten(-2)
