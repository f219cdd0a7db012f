"""Global sub-sampled attention (GSA; Twins, Chu et al. 2021; the pyramid VisionLLaMA, Chu et al. 2024 Sec. 3.2).

Queries are every token of the ``H x W`` grid; keys and values come from the grid reduced by an ``sr x sr``
strided convolution (+ LayerNorm), so attention costs ``O(N * N / sr^2)``:

    q = W_q x,   x' = LN(Conv_{k=s=sr}(x)),   [k | v] = W_kv x',   out = W_o softmax(R(q) R(k)^T / sqrt(d)) v

with 2D RoPE ``R`` on queries and keys at their own positions (:meth:`GridRoPE.subsampled_key_angles`). A grid
that is not a multiple of ``sr`` is zero-padded at the bottom/right before the convolution (the official code
floors instead and fails once the key count and its position table disagree). ``sr = 1`` is plain global
attention with separate ``q`` / ``kv`` projections and no reduction.
"""
from typing import Optional

import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from ...layers import (
    AttentionConfigError,
    AttentionProbe,
    TokenLayout,
    apply_rotary,
    build_norm_layer,
    check_head_split,
    masked_attention,
)
from ...layers.grid_rope import GSA_KEY_POSITIONS


class SubsampledAttention(nn.Module):
    """GSA token mixer; parameter names ``q``, ``kv``, ``sr``, ``norm``, ``proj`` are the official ones.

    Args:
        embed_dims: token width ``D``.
        num_heads: attention heads.
        sr_ratio: key/value reduction per side (1 = no reduction).
        key_pos: RoPE positions of the keys, ``'fixed'`` (cell centres) or ``'official'`` (the released
            weights' formula), see :meth:`~mmcausal.models.layers.GridRoPE.subsampled_key_angles`.
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
                lambda: layout.rope.subsampled_key_angles(layout.grid, self.sr_ratio, key_grid, self.key_pos,
                                                          x.device))
            q, k = apply_rotary(q, layout.angles), apply_rotary(k, key_angles)
        out = masked_attention(q, k, v, 'bidirectional', probe=self.attn_probe)
        return self.proj(out.transpose(1, 2).reshape(batch, num_tokens, dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, sr_ratio={self.sr_ratio}, key_pos={self.key_pos!r}'
