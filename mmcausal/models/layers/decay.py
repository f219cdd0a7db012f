"""De-focus ViT's token mixer: causal softmax attention through a learnable band-pass filter (De-focus Attention
Networks, Tao et al. 2024, Eq. 8; paper-derived, no official code exists: notes B2).

Per head ``h`` the logit of query ``t`` and key ``s <= t`` gets a decay bias ``lambda_h (t - s)`` with
``lambda_h = -exp(lambda_hat_h)`` (the paper's parameterisation, Sec. 5.1) and q/k are rotated by a RoPE with learnable
frequencies (:class:`~mmcausal.models.layers.LearnableRoPE`, paired):
``y_t = sum_{s<=t} softmax_s(q_t^T R(theta (t - s)) k_s / sqrt(d) + lambda_h (t - s)) v_s``.
"""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import SelfAttention, explicit_attention_requested, masked_attention
from .context import TokenLayout
from .rope import LearnableRoPE

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
        steps = torch.arange(length, device=self.log_rate.device, dtype=torch.float32)
        distance = steps[:, None] - steps[None, :]
        bias = self.rates(decay_scale)[:, None, None] * distance
        return bias.masked_fill(distance < 0, float('-inf'))


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


class DecayAttention(SelfAttention):
    """De-focus ViT attention (Eq. 8, paper-derived): ``(B, N, D) -> (B, N, D)``, strictly causal.

    q/k rotated by a paired :class:`LearnableRoPE` over the sequence index ``t / position_scale``, then causal
    softmax attention with the learnable decay bias ``lambda_h (t - s)`` (``lambda_h / decay_scale``). fp32/fp64
    inputs take :func:`folded_decay_attention` (O(N) memory) while ``|lambda| (N - 1) <= FOLD_LIMIT``; otherwise
    (bf16/fp16, very strong decays, or analysis under ``explicit_attention_mode``) the ``(heads, N, N)`` float bias
    goes to :func:`~mmcausal.models.layers.masked_attention` (SDPA, or the explicit path that feeds the probe).

    Args:
        embed_dims, num_heads, qkv_bias, proj_bias: as :class:`SelfAttention`.
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True) -> None:
        super().__init__(embed_dims, num_heads, qkv_bias=qkv_bias, proj_bias=proj_bias, mask_mode='causal')
        self.rope = LearnableRoPE(self.head_dim, pairing='paired')
        self.decay = LearnableDecay(num_heads)

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        position_scale = layout.position_scale if layout is not None else 1.
        decay_scale = layout.decay_scale if layout is not None else 1.
        batch, length, embed_dims = x.shape
        q, k, v = self.qkv(x).view(batch, length, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q, k, position_scale=position_scale)
        rates = self.decay.rates(decay_scale)
        foldable = q.dtype in (torch.float32, torch.float64) and \
            rates.detach().abs().max().item() * (length - 1) <= FOLD_LIMIT
        if foldable and not explicit_attention_requested():
            out = folded_decay_attention(q, k, v, rates.to(q.dtype))
        else:
            out = masked_attention(q, k, v.contiguous(), 'causal',
                                   attn_bias=self.decay.bias(length, decay_scale).to(q.dtype), probe=self.attn_probe)
        return self.proj(out.transpose(1, 2).reshape(batch, length, embed_dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, causal, learnable decay + RoPE'
