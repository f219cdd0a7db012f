"""Talking-heads attention (Shazeer et al. 2020) as CaiT's self-attention blocks use it (Touvron et al. 2021,
Sec. 4.3 and ``Attention_talking_head`` in the official ``cait_models.py`` of facebookresearch/deit).

With per-head logits ``S_g = s q_g k_g^T`` (``s = d^-1/2``) the heads are mixed before and after the softmax::

    L_h = sum_g Wl[h, g] S_g + bl[h]          (proj_l, over the head axis)
    P_h = softmax(L_h)                        (over the keys)
    A_h = sum_g Ww[h, g] P_g + bw[h]          (proj_w, over the head axis)
    o_h = A_h v_h

``bl`` is a no-op (a constant per softmax row). ``bw`` is not: ``A_h`` rows sum to ``sum_g Ww[h, g] + N bw[h]``,
and the term ``bw[h] sum_j v_h(j)`` depends on how many keys there are. A key mask therefore goes *after* the
pre-softmax mix (``-inf`` through ``proj_l`` would meet negative weights and give NaN) and the ``bw`` term sums
``v`` over the valid keys only.

Two exact paths:

``'explicit'``
    The formula above with ``(B, heads, N, N)`` logits and weights (about four such tensors kept for backward).
    The reference; it also feeds the weights ``A`` to the :class:`AttentionProbe`.
``'sdpa'``
    One :func:`~torch.nn.functional.scaled_dot_product_attention` call in O(N) memory: ``L_h = q'_h k'^T`` with
    ``q'_h = concat_g(Wl[h, g] s q_g)`` and ``k' = concat_g k_g`` (head dim ``C``, scale 1), values
    ``v' = concat_g v_g``, so head ``g`` returns ``P_g V'``; then ``o_h = sum_g Ww[h, g] (P_g V')[block h] +
    bw[h] sum_j v_h(j)``. It costs ``heads`` times the attention FLOPs of plain attention and stores no
    ``N x N`` tensor, but about ``2 h N C`` values (the mixed queries and the ``C``-wide outputs).
``'auto'`` (default)
    Without a key mask or causal mask (every released model), :func:`talking_heads_fused` while the one ``h N^2``
    tensor it keeps for backward is no larger than the SDPA path's ``2 h N C`` (``N <= 2C``: 224 and 384 px for
    every released CaiT but XXS, which takes it at 224 px), the SDPA path beyond (512 px and dense inputs); with
    a mask, the explicit path while ``N <= C``, the SDPA path beyond.

:func:`talking_heads_fused` is the explicit path's math (the same products, in the same order) with the head
mixings as batched matrix products over the ``(B, heads, N * N)`` view (no permuted copies) and, in training, one
autograd function that keeps only q, k, v and the softmax output ``P`` and recomputes ``S`` and ``A`` in backward
(autograd keeps ``S``, ``P``, ``A`` and the scaled q). CaiT-S24 at 384 px, batch 1, forward + backward on one CPU
thread: timm's ``cait_s24_384`` (the math of ``'explicit'``) took 1.2x-1.6x its time (docs/benchmarks.md), the SDPA
path 2.3x (a scratch measurement). Only where the autograd function runs (no autocast or ``torch.compile``) does
``'auto'`` take it in training: elsewhere the composition would keep several ``N x N`` tensors.

Causal (``mask_mode='causal'``, query ``t`` sees keys ``s <= t``) is exact with both mixings: the mask is the key mask
``s <= t``, applied after the pre-softmax mix, so ``P_h`` is zero above the diagonal; ``proj_w`` mixes those zeros
into zeros, and the ``bw`` term sums ``v`` over ``s <= t`` (a cumulative sum). The SDPA path uses SDPA's causal
kernel (still no ``N x N`` tensor). iLLaMA's ``'official'`` post-softmax mask is not defined for talking heads (which
softmax would it mask, and how would ``bw`` count keys?) and no weights were trained with it: it is refused.
"""
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.validation import check_choice
from ..layers import EXPLICIT_ATTENTION, AttentionConfigError, SelfAttention
from .fused_talking_heads import fused_function_applies, talking_heads_fused

TALKING_HEADS_IMPLS = ('auto', 'sdpa', 'explicit')

TALKING_HEADS_MASK_MODES = ('bidirectional', 'causal')


def _mix_heads(x: Tensor, mix: nn.Linear) -> Tensor:
    """Apply ``mix`` (``Linear(heads, heads)``) over the head axis of ``(B, heads, Nq, Nk)``."""
    return mix(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _valid_key_sum(v: Tensor, key_mask: Optional[Tensor], causal: bool = False) -> Tensor:
    """``sum_j v_h(j)`` over the keys each query may see: ``(B, heads, 1 or Nq, d)``; ``causal``: over ``j <= t``
    (a cumulative sum, accumulated in fp32 at least)."""
    if causal:
        return v.cumsum(dim=2, dtype=torch.promote_types(v.dtype, torch.float32)).to(v.dtype)
    if key_mask is None:
        return v.sum(dim=2, keepdim=True)
    return key_mask.to(v.dtype) @ v


def causal_key_mask(num_tokens: int, key_mask: Optional[Tensor], device: torch.device) -> Tensor:
    """``key_mask`` (or all keys) restricted to ``s <= t``: boolean, broadcastable to ``(B, heads, N, N)``."""
    causal = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device).tril()
    return causal if key_mask is None else key_mask & causal


def talking_heads_explicit(q: Tensor, k: Tensor, v: Tensor, proj_l: nn.Linear, proj_w: nn.Linear,
                           key_mask: Optional[Tensor] = None, probe: Optional[nn.Module] = None,
                           causal: bool = False) -> Tensor:
    """Reference path on ``(B, heads, N, d)`` q/k/v -> ``(B, heads, Nq, d)``; ``key_mask`` boolean (True = attend),
    broadcastable to ``(B, heads, Nq, Nk)``; ``probe`` receives the mixed weights ``A``; ``causal``: query ``t``
    sees keys ``s <= t`` only (and those of ``key_mask``)."""
    if causal:
        key_mask = causal_key_mask(q.shape[-2], key_mask, q.device)
    logits = _mix_heads((q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1), proj_l)
    if key_mask is not None:
        logits = logits.masked_fill(~key_mask, float('-inf'))
    weights = F.linear(logits.softmax(dim=-1).permute(0, 2, 3, 1), proj_w.weight).permute(0, 3, 1, 2)
    bias = proj_w.bias.view(1, -1, 1, 1)
    weights = weights + (bias if key_mask is None else bias * key_mask.to(weights.dtype))
    if probe is not None:
        weights = probe(weights)
    return weights @ v


def talking_heads_sdpa(q: Tensor, k: Tensor, v: Tensor, proj_l: nn.Linear, proj_w: nn.Linear,
                       key_mask: Optional[Tensor] = None, causal: bool = False) -> Tensor:
    """The exact SDPA formulation (module docstring) on ``(B, heads, N, d)`` q/k/v -> ``(B, heads, Nq, d)``.

    ``proj_l``'s bias drops out (a constant per softmax row); ``key_mask`` as :func:`talking_heads_explicit`;
    ``causal``: query ``t`` sees keys ``s <= t`` only (SDPA's causal kernel without ``key_mask``).
    """
    if causal and key_mask is not None:  # SDPA takes a mask or is_causal, not both
        key_mask, causal = causal_key_mask(q.shape[-2], key_mask, q.device), False
    batch, heads, num_queries, head_dim = q.shape
    width = heads * head_dim
    # q'_h = concat_g (Wl[h, g] s q_g): (B, heads, Nq, heads * d)
    mixed_q = torch.einsum('hg,bgnd->bhngd', proj_l.weight * head_dim ** -0.5, q).reshape(
        batch, heads, num_queries, width)
    keys = k.transpose(1, 2).reshape(batch, 1, -1, width).expand(batch, heads, -1, width)
    values = v.transpose(1, 2).reshape(batch, 1, -1, width).expand(batch, heads, -1, width)
    out = F.scaled_dot_product_attention(mixed_q, keys, values, attn_mask=key_mask, is_causal=causal, scale=1.)
    # o_h = sum_g Ww[h, g] (P_g V')[block h]: a broadcast product summed over g keeps nothing new for backward (the
    # SDPA output is saved already), where an einsum with the repeated index h would save a copy of it
    out = (out.view(batch, heads, num_queries, heads, head_dim) *
           proj_w.weight.t().reshape(1, heads, 1, heads, 1)).sum(1).transpose(1, 2)
    # proj_l's bias shifts each softmax row by a constant: its exact gradient is zero, and the zero factor keeps it
    # in the graph so every parameter gets a gradient (DDP without find_unused_parameters)
    return out + proj_w.bias.view(1, -1, 1, 1) * _valid_key_sum(v, key_mask, causal) + 0. * proj_l.bias.sum()


class TalkingHeadsAttention(SelfAttention):
    """CaiT's self-attention: :class:`SelfAttention`'s ``qkv`` / ``proj`` plus the head mixings ``proj_l`` (before
    the softmax) and ``proj_w`` (after it), each ``Linear(heads, heads)`` with bias (checkpoint layout of the
    official code). Optional RoPE and a boolean key mask (window padding) as the other mixers.

    Args:
        embed_dims: token width ``C``.
        num_heads: ``h`` (``C`` divisible by it).
        qkv_bias: bias of ``qkv`` (True in every released CaiT).
        impl: ``'auto'`` (by token count, module docstring), ``'sdpa'`` (O(N) memory, ``h`` x attention FLOPs) or
            ``'explicit'`` (materialised ``h x N x N``); all exact. :func:`explicit_attention_mode` forces the
            explicit path.
        mask_mode: ``'bidirectional'`` (CaiT) or ``'causal'`` (strict, in sequence order; module docstring). No
            soft-mask rate: ``soft_mask_rate`` is not read.
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True, impl: str = 'auto',
                 mask_mode: str = 'bidirectional') -> None:
        check_choice('talking-heads mask_mode', mask_mode, TALKING_HEADS_MASK_MODES, AttentionConfigError)
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, mask_mode=mask_mode)
        self.impl = check_choice('talking-heads impl', impl, TALKING_HEADS_IMPLS, AttentionConfigError)
        self.proj_l = nn.Linear(num_heads, num_heads)
        self.proj_w = nn.Linear(num_heads, num_heads)

    def attend(self, x: Tensor, rope_angles: Optional[Tensor] = None, attn_bias: Optional[Tensor] = None,
               rotation: Optional[Tensor] = None) -> Tensor:
        """Talking-heads attention over the ``N`` tokens of ``x`` ``(B, N, C)``; ``attn_bias`` may only be a
        boolean key mask (True = attend), the same for every head: broadcastable to ``(B, 1, N, N)``; RoPE
        arguments as :meth:`SelfAttention.attend`."""
        if attn_bias is not None and (attn_bias.dtype != torch.bool or attn_bias.dim() != 4 or attn_bias.shape[1] != 1):
            raise AttentionConfigError('Talking-heads attention takes a boolean key mask shared by the heads, shape '
                                       '(B, 1, Nq or 1, Nk): a float bias or a per-head mask would be mixed across '
                                       'heads.')
        num_tokens, embed_dims = x.shape[1:]
        q, k, v = self.project_heads(x, rope_angles, rotation)
        causal = self.mask_mode == 'causal'
        if EXPLICIT_ATTENTION.get() or self.impl == 'explicit':
            explicit = True
        elif (self.impl == 'auto' and attn_bias is None and not causal and num_tokens <= 2 * embed_dims
              and fused_function_applies(q.device.type)):
            return self.merge_heads(talking_heads_fused(q, k, v, self.proj_l, self.proj_w))
        else:
            explicit = self.impl == 'auto' and num_tokens <= embed_dims
        if explicit:
            out = talking_heads_explicit(q, k, v, self.proj_l, self.proj_w, attn_bias, probe=self.attn_probe,
                                         causal=causal)
        else:
            out = talking_heads_sdpa(q, k, v, self.proj_l, self.proj_w, attn_bias, causal=causal)
        return self.merge_heads(out)

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, impl={self.impl!r}, mask_mode={self.mask_mode!r}'
