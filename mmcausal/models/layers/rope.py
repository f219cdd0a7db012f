"""Rotary position embedding (RoPE, Su et al. 2021), the position family shared by all backbones.

A rotary embedding is split in two steps so every variant shares the rotation:

1. an *angle table* ``(..., N, head_dim // 2)`` in fp32, one angle per token and channel pair,
   computed from the actual token positions at forward time (never from a constructor-time length);
2. :func:`apply_rotary`, which rotates each adjacent channel pair ``(x[2i], x[2i+1])`` of q and k by its
   angle (the "interleaved" layout of Meta's LLaMA and of iLLaMA's released weights).

With angles ``t * w_i`` the score ``<R(t) q, R(s) k>`` depends on ``t - s`` only.
The position policies that make the angle tables: :mod:`.grid_rope` beside it (``GridRoPE``, fixed ladders over
1D / 2D / AS2D grids) and De-focus's own :mod:`mmcausal.models.backbones.defocus.learnable_rope` (``LearnableRoPE``).
"""
from typing import Optional

import torch
from torch import Tensor

from mmcausal.utils.errors import UserInputError


class RopeConfigError(UserInputError, ValueError):
    """An unknown or invalid RoPE setting in a config (the message lists the valid values)."""


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
        Tensor like ``x``, see :func:`rotate_pairs`.
    """
    return rotate_pairs(x, angles.unsqueeze(1) if angles.dim() == 3 else angles)  # broadcast over heads


def rotate_pairs(x: Tensor, angles: Tensor) -> Tensor:
    """``(x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)`` for every channel pair of ``x`` ``(..., d)``,
    with ``angles`` broadcastable to ``(..., d // 2)`` (any token layout).

    Eager: one complex product ``(x0 + i x1) * exp(i a)`` in (at least) fp32, cast back to ``x.dtype``; with fixed
    angles backward keeps only the ``exp(i a)`` table, never a copy of ``x``. Under ``torch.compile`` the same
    rotation in real arithmetic (:func:`rotate_pairs_real`: complex views of real tensors do not trace, and the
    compiler fuses the real form into one kernel). Differentiable in ``x`` and ``angles``.
    """
    if torch.compiler.is_compiling():
        return rotate_pairs_real(x, angles)
    pairs = complex_pairs(x.to(torch.promote_types(x.dtype, torch.float32)))
    return torch.view_as_real(pairs * rotation_table(angles)).flatten(-2).type_as(x)


def rotate_pairs_real(x: Tensor, angles: Tensor, second_angles: Optional[Tensor] = None) -> Tensor:
    """:func:`rotate_pairs` in real arithmetic: ``(x0 cos a - x1 sin a, x1 cos b + x0 sin b)`` per channel pair,
    computed in (at least) fp32 and cast back to ``x.dtype``, with ``b = a`` (a rotation) unless ``second_angles``
    gives the second member of each pair its own angle
    (De-focus's :func:`~mmcausal.models.backbones.defocus.apply_unpaired_rotary`)."""
    x0, x1 = x.to(torch.promote_types(x.dtype, torch.float32)).unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = angles.cos(), angles.sin()
    cos1, sin1 = (cos, sin) if second_angles is None else (second_angles.cos(), second_angles.sin())
    return torch.stack((x0 * cos - x1 * sin, x1 * cos1 + x0 * sin1), dim=-1).flatten(-2).type_as(x)


def rotation_table(angles: Tensor) -> Tensor:
    """``exp(i a)`` (complex) for an angle table ``a``, the factor :func:`rotate_pairs` multiplies pairs by."""
    return torch.polar(torch.ones_like(angles), angles)


def complex_pairs(x: Tensor) -> Tensor:
    """Adjacent channel pairs of ``x`` ``(..., d)`` as complex numbers ``(..., d // 2)``: a view where the strides
    allow it (whole ``(re, im)`` pairs), else a view of a fresh contiguous copy."""
    pairs = x.unflatten(-1, (-1, 2))
    if pairs.storage_offset() % 2 or any(stride % 2 for stride in pairs.stride()[:-1]) or pairs.stride(-1) != 1:
        pairs = pairs.clone(memory_format=torch.contiguous_format)
    return torch.view_as_complex(pairs)


def rotate_pairs_into(out: Tensor, x: Tensor, rotation: Tensor) -> None:
    """Write ``x`` ``(..., d)`` with its channel pairs multiplied by ``rotation`` (complex, broadcastable to
    ``(..., d // 2)``) into ``out`` (same shape, whole pairs in memory), without autograd. fp32/fp64 ``x`` is
    rotated straight into ``out``; lower precision goes through fp32 and is cast back."""
    if x.dtype == out.dtype and x.dtype in (torch.float32, torch.float64):
        torch.mul(complex_pairs(x), rotation, out=torch.view_as_complex(out.unflatten(-1, (-1, 2))))
    else:
        out.copy_(torch.view_as_real(complex_pairs(x.float()) * rotation).flatten(-2))


def rope_angles_1d(positions: Tensor, freqs: Tensor) -> Tensor:
    """1D RoPE angle table ``angles[..., t, i] = p_t * w_i``: positions ``(..., N)`` -> ``(..., N, len(freqs))``."""
    return positions.float().unsqueeze(-1) * freqs


def rope_angles_2d(positions: Tensor, freqs: Tensor) -> Tensor:
    """2D RoPE angle table (VisionLLaMA Sec. 3.1, channel layout of the official code).

    With ``d = head_dim`` and ``w_k = theta^(-4k/d)`` for ``k < d/4`` (``freqs``), channel pair ``2k`` (channels
    ``4k, 4k+1``) turns by ``x * w_k`` and pair ``2k+1`` (channels ``4k+2, 4k+3``) by ``y * w_k``:
    ``angles[n] = [x w_0, y w_0, x w_1, y w_1, ...]``. The score ``<R(y,x) q, R(y',x') k>`` then depends on
    ``(y - y', x - x')`` only, and one table serves every head.

    Args:
        positions: ``(..., N, 2)`` as ``(y, x)``.
        freqs: ``(d/4,)`` per-axis frequencies.

    Returns:
        ``(..., N, d/2)`` fp32 angles.
    """
    positions = positions.float()
    along_x = positions[..., 1:2] * freqs
    along_y = positions[..., 0:1] * freqs
    return torch.stack((along_x, along_y), dim=-1).flatten(-2)
