"""De-focus RetNet's token mixer: multi-scale retention (Sun et al. 2023) with De-focus's learnable decay and
learnable-frequency RoPE (De-focus Attention Networks, Eq. 4 with learnable ``lambda`` and ``theta``; paper-derived, no
official code exists).

Retention of one head, no softmax, ``gamma_h = exp(lambda_h)``:
``o_t = sum_{s<=t} exp(lambda_h (t - s)) (q_t . k_s) v_s``, i.e. ``((Q K^T) * D) V`` with the causal decay matrix
``D_ts = exp(lambda_h (t - s))`` (parallel form), or ``S_t = gamma_h S_{t-1} + k_t^T v_t``, ``o_t = q_t S_t``
(recurrent form). :func:`retention` computes it chunk-wise: the parallel form inside chunks of ``T`` tokens, the
recurrence across chunks, so memory is O(N T) instead of O(N^2); ``chunk_size=None`` is the parallel form.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from ..layers import TokenLayout, check_head_split
from .backbone import LearnableDecay, LearnableRoPE
from .scans.chunked import check_chunk_size


class RetentionConfigError(UserInputError, ValueError):
    """An invalid retention setting (chunk size, width not divisible by the heads)."""


def _decay_powers(rates: Tensor, exponents: Tensor) -> Tensor:
    """``exp(lambda_h * e)`` for non-negative ``e`` and 0 where ``e < 0``: ``(heads,) x (...) -> (heads, ...)``."""
    powers = torch.exp(rates.view(-1, *([1] * exponents.dim())) * exponents.clamp(min=0))
    return powers * (exponents >= 0)


def retention(q: Tensor, k: Tensor, v: Tensor, rates: Tensor, chunk_size: Optional[int] = None) -> Tensor:
    """Causal retention ``o_t = sum_{s<=t} exp(lambda_h (t - s)) (q_t . k_s) v_s``.

    Args:
        q, k: ``(B, heads, N, d_k)``; v: ``(B, heads, N, d_v)``.
        rates: ``(heads,)`` decay rates ``lambda_h <= 0``.
        chunk_size: tokens per chunk ``T``; None = one chunk (the parallel form, ``(B, heads, N, N)`` scores).
            Only exponentials of non-positive numbers are taken, so any ``T`` is finite.

    Returns:
        ``(B, heads, N, d_v)``.
    """
    length = q.shape[-2]
    size = length if chunk_size is None else min(chunk_size, length)
    pad = -length % size
    exporting = torch.compiler.is_exporting()  # a graph for any length: both branches below, whatever this length
    if exporting or pad:
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))  # zero keys/values add nothing
    num_chunks = (length + pad) // size
    qc, kc, vc = (x.unflatten(2, (num_chunks, size)) for x in (q, k, v))  # (B, heads, C, T, d)
    exact = torch.promote_types(q.dtype, torch.float32)  # decay powers in fp32 (fp64 for fp64 inputs)
    steps = torch.arange(size, device=q.device, dtype=exact)
    rates = rates.to(exact)
    local = _decay_powers(rates, steps[:, None] - steps[None, :]).to(q.dtype)  # (heads, T, T)
    out = ((qc @ kc.transpose(-1, -2)) * local[:, None]) @ vc
    if exporting or num_chunks > 1:  # one chunk: ``carry`` is 0 and nothing is added
        to_chunk_end = _decay_powers(rates, size - 1 - steps).to(q.dtype)[:, None, :, None]  # (heads, 1, T, 1)
        summaries = (kc * to_chunk_end).transpose(-1, -2) @ vc  # (B, heads, C, d_k, d_v): chunk c at its last token
        chunks = torch.arange(num_chunks, device=q.device, dtype=exact)
        carry = _decay_powers(rates * size, chunks[:, None] - 1 - chunks[None, :]).to(q.dtype)  # (heads, C, C)
        entering = torch.einsum('hcx,bhxkv->bhckv', carry, summaries)  # state before chunk c's first token
        from_entry = _decay_powers(rates, steps + 1).to(q.dtype)[:, None, :, None]
        out = out + (qc * from_entry) @ entering
    return out.flatten(2, 3)[:, :, :length]


def retention_step(q: Tensor, k: Tensor, v: Tensor, state: Optional[Tensor], rates: Tensor) -> Tuple[Tensor, Tensor]:
    """One step of the recurrent form: ``S_t = exp(lambda_h) S_{t-1} + k_t^T v_t``, ``o_t = q_t S_t``.

    Args:
        q, k: ``(B, heads, d_k)``; v: ``(B, heads, d_v)`` of token ``t``.
        state: ``(B, heads, d_k, d_v)`` after token ``t - 1`` (None before the first token).
        rates: ``(heads,)``.

    Returns:
        ``o_t`` ``(B, heads, d_v)`` and the new state.
    """
    update = k.unsqueeze(-1) * v.unsqueeze(-2)
    if state is not None:
        decay = torch.exp(rates.to(torch.promote_types(rates.dtype, torch.float32)))  # at least fp32, fp64 kept
        update = update + decay.to(state.dtype)[:, None, None] * state
    return (q.unsqueeze(-2) @ update).squeeze(-2), update


class MultiScaleRetention(nn.Module):
    """De-focus RetNet mixer: ``(B, N, D) -> (B, N, D)``, strictly causal (RetNet's MSR, Eq. 8-9 of Sun et al.)::

        q, k, v, g = x W_Q, x W_K, x W_V, x W_G          # D -> D each, no bias; heads of d = D / heads
        q, k = RoPE(q), RoPE(k) / sqrt(d)                # learnable frequencies, positions t / position_scale
        o = retention(q, k, v, lambda / decay_scale)     # per-head learnable decay lambda_h = -exp(lambda_hat_h)
        out = W_O(SiLU(g) * GroupNorm_heads(o))          # one group per head

    Args:
        embed_dims: ``D``.
        num_heads: heads (each with its own decay).
        chunk_size: see :func:`retention` (None = the parallel form).
        norm_eps: GroupNorm epsilon.
    """

    def __init__(self, embed_dims: int, num_heads: int, chunk_size: Optional[int] = 64, norm_eps: float = 1e-5) -> None:
        super().__init__()
        self.head_dim = check_head_split(embed_dims, num_heads, RetentionConfigError)
        check_chunk_size(chunk_size, RetentionConfigError)
        self.num_heads = num_heads
        self.chunk_size = chunk_size
        self.q_proj, self.k_proj, self.v_proj, self.g_proj, self.out_proj = (
            nn.Linear(embed_dims, embed_dims, bias=False) for _ in range(5))
        self.rope = LearnableRoPE(self.head_dim, pairing='paired')
        self.decay = LearnableDecay(num_heads)
        self.group_norm = nn.GroupNorm(num_heads, embed_dims, eps=norm_eps)

    def _heads(self, x: Tensor) -> Tensor:
        return x.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        position_scale = layout.position_scale if layout is not None else 1.
        decay_scale = layout.decay_scale if layout is not None else 1.
        q, k = self.rope(self._heads(self.q_proj(x)), self._heads(self.k_proj(x)), position_scale=position_scale)
        out = retention(q, k * self.head_dim ** -0.5, self._heads(self.v_proj(x)), self.decay.rates(decay_scale),
                        self.chunk_size)
        out = self.group_norm(out.transpose(1, 2).flatten(0, 1).flatten(1)).view_as(x)
        return self.out_proj(F.silu(self.g_proj(x)) * out)

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, chunk_size={self.chunk_size}'
