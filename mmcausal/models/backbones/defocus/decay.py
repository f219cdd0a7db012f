"""De-focus ViT's token mixer: causal softmax attention through a learnable band-pass filter (De-focus Attention
Networks, Tao et al. 2024; paper-derived, no official code exists).

Per head ``h`` the logit of query ``t`` and key ``s <= t`` gets a decay bias ``lambda_h (t - s)`` with
``lambda_h = -exp(lambda_hat_h)`` (the paper's parameterisation, Sec. 5.1) and q/k are rotated by a RoPE with learnable
frequencies (:class:`~.learnable_rope.LearnableRoPE`, paired):
``y_t = sum_{s<=t} softmax_s(q_t^T R(theta (t - s)) k_s / sqrt(d) + lambda_h (t - s)) v_s``.
This is notes B2's reading of the paper's Eq. 8 (the decay multiplies the *un-normalised* weight ``exp(logit)``, an
ALiBi-style bias with a learnable slope); read literally, Eq. 8 puts ``e^{lambda (t - s)}`` inside the logit as a
factor (xPos-style). Neither is verified against code.
"""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...layers import SelfAttention, TokenLayout, explicit_attention_requested, masked_attention
from .learnable_rope import LearnableRoPE

#: Largest ``|lambda| * (N - 1)`` for which the fp32 fast path folds the decay into q/k (its logit error is about
#: this value times 2^-24, i.e. <= 6e-5); stronger decays go through SDPA with the (heads, N, N) float bias.
FOLD_LIMIT = 2. ** 10


def retnet_decay_exponents(num_heads: int, low: float = 5., high: float = 12.) -> Tensor:
    """``lambda_hat`` so that ``gamma_h = exp(lambda_h) = 1 - 2^-e_h`` with ``e_h`` evenly spaced over
    ``[low, high]`` (RetNet-like decays, notes B2): ``lambda_hat = log(-log(1 - 2^-e))``, shape ``(num_heads,)``."""
    exponents = torch.linspace(low, high, num_heads, dtype=torch.float64) if num_heads > 1 else \
        torch.tensor([low], dtype=torch.float64)
    return torch.log(-torch.log1p(-2. ** -exponents)).float()


class LearnableDecay(nn.Module):
    """Per-head exponential decay rates ``lambda_h = -exp(lambda_hat_h) / decay_scale`` (always negative).

    Attributes:
        log_rate: ``lambda_hat`` ``(num_heads,)``, initialised by :func:`retnet_decay_exponents`.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        self.log_rate = nn.Parameter(retnet_decay_exponents(num_heads))

    def rates(self, decay_scale: float = 1.) -> Tensor:
        """``(heads,)`` fp32 rates ``lambda_h``; ``decay_scale`` is De-focus's ``delta_scale_factor``."""
        return -torch.exp(self.log_rate.float()) / decay_scale

    def bias(self, length: int, decay_scale: float = 1.) -> Tensor:
        """``(heads, L, L)`` fp32 logit bias ``lambda_h (t - s)``, ``-inf`` above the diagonal (causal)."""
        return decay_bias(self.rates(decay_scale), length)


def decay_bias(rates: Tensor, length: int) -> Tensor:
    """``(heads, L, L)`` logit bias ``lambda_h (t - s)`` of ``rates`` ``(heads,)``, ``-inf`` above the diagonal."""
    steps = torch.arange(length, device=rates.device, dtype=torch.float32)
    distance = steps[:, None] - steps[None, :]
    return (rates[:, None, None] * distance).masked_fill(distance < 0, float('-inf'))


@torch.compiler.assume_constant_result
def float32_matmul_precision() -> str:
    """``torch.get_float32_matmul_precision()``; a compiled graph takes the value it had at compile time."""
    return torch.get_float32_matmul_precision()


def _pad_last(x: Tensor, width: int, value: Optional[Tensor] = None) -> Tensor:
    """``x`` ``(..., d)`` -> ``(..., width)``: ``value`` ``(..., 1)`` (if given) in channel ``d``, zeros after."""
    pieces = [x] if value is None else [x, value.to(x.dtype)]
    used = x.shape[-1] + (value is not None)
    if width > used:
        pieces.append(x.new_zeros(*x.shape[:-1], width - used))
    return torch.cat(pieces, dim=-1)


def folded_decay_attention(q: Tensor, k: Tensor, v: Tensor, rates: Tensor) -> Tensor:
    """Causal attention with the logit bias ``lambda_h (t - s)`` in O(N) memory (SDPA ``is_causal``).

    Within the softmax of row ``t`` the term ``lambda_h t`` is a constant, so the bias equals the per-key bias
    ``-lambda_h s``, which one extra channel carries: ``q' = [q, 1]``, ``k' = [k, -lambda_h s sqrt(d)]`` with the
    scale ``1 / sqrt(d)`` of the original width (both padded to a multiple of 8 for the fused kernels).
    Exact math; in fp32 the logits carry an absolute error of about ``|lambda| N 2^-24``.

    Args:
        q, k, v: ``(B, heads, N, d)``.
        rates: ``(heads,)`` ``lambda_h < 0``.
    """
    head_dim, length = q.shape[-1], q.shape[-2]
    width = 8 * math.ceil((head_dim + 1) / 8)
    positions = torch.arange(length, device=q.device, dtype=torch.float32)
    key_bias = (-rates[:, None] * positions * math.sqrt(head_dim))[..., None].expand(*k.shape[:-1], 1)
    out = F.scaled_dot_product_attention(_pad_last(q, width, torch.ones_like(q[..., :1])),
                                         _pad_last(k, width, key_bias), _pad_last(v, width),
                                         is_causal=True, scale=head_dim ** -0.5)
    return out[..., :head_dim]


def biased_decay_attention(q: Tensor, k: Tensor, v: Tensor, rates: Tensor,
                           probe: Optional[nn.Module] = None) -> Tensor:
    """The same attention as :func:`folded_decay_attention` with the decay as a ``(heads, N, N)`` float bias (which
    holds the causal ``-inf`` too) through :func:`masked_attention`: O(heads N^2) memory, any dtype and decay."""
    return masked_attention(q, k, v.contiguous(), 'bidirectional', attn_bias=decay_bias(rates, q.shape[-2]).to(q.dtype),
                            probe=probe)


class DecayAttention(SelfAttention):
    """De-focus ViT attention (notes B2's reading of Eq. 8): ``(B, N, D) -> (B, N, D)``, strictly causal.

    :class:`~mmcausal.models.layers.SelfAttention`'s ``qkv`` (rows ``[q | k | v]`` split by head) and ``proj``
    (``mask_mode='causal'``; no soft-mask rate: ``soft_mask_rate`` is not read); q/k
    rotated by a paired :class:`LearnableRoPE` over the sequence index ``t / position_scale``, then causal softmax
    attention with the learnable decay bias ``lambda_h (t - s)`` (``lambda_h / decay_scale``).

    Paths: fp64 inputs, and fp32 inputs under ``torch.get_float32_matmul_precision() == 'highest'`` (the default),
    take :func:`folded_decay_attention` (SDPA's causal kernel, O(N) memory) while ``|lambda| (N - 1) <= FOLD_LIMIT``.
    Otherwise (bf16/fp16 autocast, reduced-precision fp32 matmuls, decays stronger than the limit) the
    ``(heads, N, N)`` float bias goes to SDPA (:func:`biased_decay_attention`), which keeps O(heads N^2) for the bias;
    under :func:`~mmcausal.models.layers.explicit_attention_mode` the explicit path feeds ``attn_probe``. The limit is
    read from the device only after the rates changed (see :meth:`_within_fold_limit`, also for ``torch.compile``).

    Args:
        embed_dims: ``D``.
        num_heads: heads (each with its own decay).
        qkv_bias, proj_bias: biases of the projections.
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias, mask_mode='causal')
        self.rope = LearnableRoPE(self.head_dim, pairing='paired')
        self.decay = LearnableDecay(num_heads)
        self._fold_checked_for: Optional[tuple] = None  # the rates' identity, version, scale and length last checked
        self._fold_checked_within = True  # their result (compiled code reads it, see _within_fold_limit)

    def _fold_precise(self, q: Tensor) -> bool:
        """Whether the fold's fp32 error bound holds for ``q``'s dtype and matmul precision (and no probe reads)."""
        if explicit_attention_requested():
            return False
        if q.dtype == torch.float32:
            return float32_matmul_precision() == 'highest'
        return q.dtype == torch.float64

    def _within_fold_limit(self, rates: Tensor, decay_scale: float, length: int) -> bool:
        """``|lambda| (N - 1) <= FOLD_LIMIT``, read from the device only when the rates changed since the last
        check (an optimizer step, a load, a new ``decay_scale`` or length): no host sync per forward at fixed
        weights (inference, evaluation, the micro-batches of one accumulated step).

        Under ``torch.compile`` the result of the last eager check (True before any), a Python value the compiled
        graph is guarded on: a compiled run does not see its own rates cross the limit (an eager forward, e.g. a
        validation outside the compiled ``train_step``, checks again and the next compiled call recompiles). Past the
        limit the fold stays exact math, its fp32 logit error grows as ``|lambda| N 2^-24``."""
        if torch.compiler.is_compiling():  # a branch on a device value would break the graph
            return self._fold_checked_within
        log_rate = self.decay.log_rate
        key = (id(log_rate), log_rate.data_ptr(), log_rate._version, decay_scale, length)
        if key != self._fold_checked_for:
            self._fold_checked_for = key
            self._fold_checked_within = rates.detach().abs().max().item() * (length - 1) <= FOLD_LIMIT
        return self._fold_checked_within

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        position_scale = layout.position_scale if layout is not None else 1.
        decay_scale = layout.decay_scale if layout is not None else 1.
        length = x.shape[1]
        q, k, v = self.project_heads(x)
        q, k = self.rope(q, k, position_scale=position_scale)
        rates = self.decay.rates(decay_scale)
        if self._fold_precise(q) and self._within_fold_limit(rates, decay_scale, length):
            out = folded_decay_attention(q, k, v, rates.to(q.dtype))
        else:
            out = biased_decay_attention(q, k, v, rates, self.attn_probe)
        return self.merge_heads(out)

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, causal, learnable decay + RoPE'
