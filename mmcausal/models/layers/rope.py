"""Rotary position embedding (RoPE, Su et al. 2021), the position family shared by all backbones.

A rotary embedding is split in two steps so every variant shares the rotation:

1. an *angle table* ``(..., N, head_dim // 2)`` in fp32, one angle per token and channel pair,
   computed from the actual token positions at forward time (never from a constructor-time length);
2. :func:`apply_rotary`, which rotates each adjacent channel pair ``(x[2i], x[2i+1])`` of q and k by its
   angle (the "interleaved" layout of Meta's LLaMA and of iLLaMA's released weights).

With angles ``t * w_i`` the score ``<R(t) q, R(s) k>`` depends on ``t - s`` only.
"""
import torch
from torch import Tensor, nn


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
