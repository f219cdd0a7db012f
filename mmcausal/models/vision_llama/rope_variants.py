"""The RoPE variants of VisionLLaMA's ablations (paper Table 7(c) and (e)): partial and per-head 2D RoPE.

* **Partial RoPE** (Table 7(c), ``ratio`` < 1): only the first ``r = int(ratio * head_dim)`` channels of every head
  are rotated, by a 2D RoPE of width ``r`` (frequencies ``theta^(-4k/r)``, ``k < r/4``); the other channels pass
  unrotated. This is the official ``RAttention`` of ``deit/my_models.py`` (``rpe_ratio``): the table is built for
  ``int(head_dim * rpe_ratio)`` channels and applied to ``q[..., :rpe_dim]``, ``k[..., :rpe_dim]``.
* **Per-head frequencies** (Table 7(e), ``shared=False``): one 2D RoPE of width ``r * heads`` whose frequency
  ladder ``theta^(-4k/(r * heads))`` is cut into ``heads`` consecutive bands, band ``h`` rotating head ``h`` (the
  official ``share_rpe=False``: a table for ``embed_dim * rpe_ratio`` channels viewed as ``(N, heads, r/2)``).
  Every head then sees other frequencies; with ``shared=True`` (the default) all heads share one ladder.

Unrotated channels get angle 0 (``cos 0 = 1``, ``sin 0 = 0``: exactly the identity), so a partial table is the
rotated table padded with zeros to ``head_dim / 2`` and runs through every mixer unchanged. Per-head tables have a
heads axis, ``(heads, N, head_dim/2)`` (``(B, heads, N', head_dim/2)`` per sample), which
:class:`HeadwiseRoPEAttention` applies.
"""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from ..layers import GridRoPE, RopeConfigError, SelfAttention, TokenLayout, rotate_pairs


class PartialGridRoPE(GridRoPE):
    """:class:`~mmcausal.models.layers.GridRoPE` rotating a fraction of each head, optionally with per-head bands.

    Args:
        head_dim: channels per head.
        num_heads: heads (the bands of ``shared=False``).
        ratio: fraction of each head's channels that is rotated, in ``(0, 1]``.
        shared: one frequency ladder for every head (True) or one band of a ``heads``-times wider ladder per head.
        **kwargs: :class:`~mmcausal.models.layers.GridRoPE`'s ``mode``, ``anchor``, ``as2d_scaling``,
            ``cls_rope``, ``theta``, ``requires_2d``.
    """

    def __init__(self, head_dim: int, num_heads: int, ratio: float = 1., shared: bool = True, **kwargs) -> None:
        if not 0. < ratio <= 1.:
            raise RopeConfigError(f'rope_ratio must be in (0, 1], got {ratio}.')
        rotated = int(head_dim * ratio)
        if rotated % 4:
            raise RopeConfigError(f'rope_ratio={ratio} rotates {rotated} of {head_dim} channels per head; 2D RoPE '
                                  'needs a multiple of 4.')
        self.full_head_dim, self.num_heads, self.rotated, self.shared = head_dim, num_heads, rotated, shared
        super().__init__(rotated if shared else rotated * num_heads, **kwargs)

    def angles(self, positions: Tensor) -> Tensor:
        """Positions -> ``(..., N, head_dim/2)`` (shared) or ``(..., heads, N, head_dim/2)`` fp32 angles."""
        angles = super().angles(positions)
        if not self.shared:
            angles = angles.unflatten(-1, (self.num_heads, self.rotated // 2)).movedim(-2, -3)
        return F.pad(angles, (0, (self.full_head_dim - self.rotated) // 2))

    def extra_repr(self) -> str:
        return f'{super().extra_repr()}, rotated={self.rotated}/{self.full_head_dim}, shared={self.shared}'


class HeadwiseRoPEAttention(SelfAttention):
    """:class:`~mmcausal.models.layers.SelfAttention` whose RoPE table has a heads axis (per-head frequency bands,
    :class:`PartialGridRoPE` with ``shared=False``): ``(heads, N, hd/2)`` or ``(B, heads, N, hd/2)``."""

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        """``x`` ``(B, N, D)`` -> ``(B, N, D)``."""
        return self.attend(x, None if layout is None else layout.angles)

    def project_heads(self, x: Tensor, rope_angles: Optional[Tensor] = None,
                      rotation: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
        """``q, k, v`` ``(B, heads, N, head_dim)``, q and k rotated head by head."""
        q, k, v = super().project_heads(x)
        if rope_angles is None:
            return q, k, v
        return rotate_pairs(q, rope_angles), rotate_pairs(k, rope_angles), v
