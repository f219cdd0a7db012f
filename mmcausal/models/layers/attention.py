"""Multi-head self-attention with the masking modes of the causal-ViT papers.

Every mode goes through :func:`torch.nn.functional.scaled_dot_product_attention` (SDPA, O(N) extra memory
with the flash/memory-efficient kernels) except where SDPA cannot express the math; the explicit path
:func:`explicit_attention` is the reference that tests compare every fast path to.

Mask modes (``alpha`` = soft-mask rate, a runtime attribute driven by :class:`~mmcausal.engine.SoftMaskHook`):

``'bidirectional'``
    ``softmax(q k^T / sqrt(d)) v`` over all keys; ``alpha`` is ignored.
``'causal'``
    Strictly causal: output ``t`` only depends on tokens ``s <= t``. For ``0 < alpha < 1`` (the soft-mask
    warm start of iLLaMA) the un-normalised weight of every future key is multiplied by ``alpha`` *before*
    normalisation, i.e. a logit bias ``log(alpha)`` on ``s > t``: rows still sum to one, ``alpha = 0`` is
    causal attention (SDPA ``is_causal``) and ``alpha = 1`` is bidirectional.
``'official'``
    iLLaMA's released code and paper Eq. 2: ``A = softmax(q k^T / sqrt(d)) * (alpha + (1 - alpha) * tril)``
    with **no renormalisation**. At ``alpha = 0`` row ``t`` equals causal attention times
    ``c_t = sum_{s<=t} softmax_t(s)``, a gate that depends on future tokens, so this mode is not strictly
    causal. The released iLLaMA weights were trained with it; it needs the full row normaliser, so for
    ``alpha < 1`` it runs the explicit O(B*heads*N^2) path.
"""
import functools
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from .rope import apply_rotary

MASK_MODES = ('bidirectional', 'causal', 'official')


class AttentionConfigError(UserInputError, ValueError):
    """An invalid attention setting in a config (unknown ``mask_mode``, ``embed_dims`` not divisible by heads)."""


@functools.lru_cache(maxsize=4)
def soft_causal_weights(num_tokens: int, alpha: float, device: torch.device,
                        dtype: torch.dtype = torch.float32) -> Tensor:
    """iLLaMA soft mask ``S = alpha * 1 + (1 - alpha) * tril`` (paper Eq. 2), shape ``(N, N)``.

    Cached: every block of a forward pass asks for the same ``(N, alpha)``; treat the result as read-only.
    Built outside inference mode so a table first made under ``torch.inference_mode`` still serves training.
    """
    with torch.inference_mode(False):
        tril = torch.ones(num_tokens, num_tokens, device=device, dtype=dtype).tril()
        return alpha + (1. - alpha) * tril


@functools.lru_cache(maxsize=4)
def soft_causal_logit_bias(num_tokens: int, alpha: float, device: torch.device,
                           dtype: torch.dtype = torch.float32) -> Tensor:
    """Additive bias ``log S``: 0 on and below the diagonal, ``log(alpha)`` above it, shape ``(N, N)``."""
    with torch.inference_mode(False):
        return soft_causal_weights(num_tokens, alpha, device, dtype).log()


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, *, logit_bias: Optional[Tensor] = None,
                       post_softmax_weights: Optional[Tensor] = None) -> Tensor:
    """Reference attention ``(softmax(q k^T / sqrt(d) + bias) * W) v`` on ``(B, heads, N, head_dim)`` inputs.

    Materialises the ``(B, heads, N, N)`` score matrix: use it only where SDPA cannot express the math.
    """
    scores = (q * (q.shape[-1] ** -0.5)) @ k.transpose(-2, -1)
    if logit_bias is not None:
        scores = scores + logit_bias
    weights = scores.softmax(dim=-1)
    if post_softmax_weights is not None:
        weights = weights * post_softmax_weights
    return weights @ v


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask_mode: str, alpha: float = 0.,
                     key_mask: Optional[Tensor] = None) -> Tensor:
    """Dispatch ``(B, heads, N, head_dim)`` q/k/v to the fastest path that implements ``mask_mode`` at ``alpha``.

    ``key_mask`` (boolean, broadcastable to ``(B, heads, N, N)``, True = attend) hides keys such as window
    padding; it is only defined for bidirectional attention.
    """
    if key_mask is not None and mask_mode != 'bidirectional':
        raise ValueError(f'A key mask (e.g. windowed attention) needs mask_mode="bidirectional", got {mask_mode!r}.')
    if mask_mode == 'bidirectional' or alpha >= 1.:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask)
    num_tokens = q.shape[-2]
    if mask_mode == 'causal':
        if alpha <= 0.:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        bias = soft_causal_logit_bias(num_tokens, alpha, q.device, q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    weights = soft_causal_weights(num_tokens, alpha, q.device, q.dtype)
    return explicit_attention(q, k, v, post_softmax_weights=weights)


class SelfAttention(nn.Module):
    """Multi-head self-attention with optional RoPE on q/k and a masking mode.

    ``qkv`` rows are ordered ``[q | k | v]``, each split by head (the timm/iLLaMA layout).

    Args:
        embed_dims: token width ``D``.
        num_heads: number of heads (``D`` must be divisible by it).
        qkv_bias: bias of the fused qkv projection.
        proj_bias: bias of the output projection.
        mask_mode: one of :data:`MASK_MODES` (see module docstring).

    Attributes:
        soft_mask_rate: ``alpha`` in ``[0, 1]``, set at runtime (by the backbone or a hook).
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 mask_mode: str = 'causal') -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise AttentionConfigError(f'embed_dims ({embed_dims}) must be divisible by num_heads ({num_heads}).')
        self.num_heads = num_heads
        self.head_dim = embed_dims // num_heads
        self.mask_mode = check_choice('attention mask_mode', mask_mode, MASK_MODES, AttentionConfigError)
        self.soft_mask_rate = 0.
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims, bias=proj_bias)

    def forward(self, x: Tensor, rope_angles: Optional[Tensor] = None, key_mask: Optional[Tensor] = None) -> Tensor:
        """``x`` ``(B, N, D)``, ``rope_angles`` ``(N, head_dim/2)`` or ``(B, N, head_dim/2)`` -> ``(B, N, D)``.

        ``key_mask``: optional boolean ``(B, 1, 1, N)`` (True = attend), see :func:`masked_attention`.
        """
        batch, num_tokens, embed_dims = x.shape
        q, k, v = self.qkv(x).view(batch, num_tokens, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if rope_angles is not None:
            q, k = apply_rotary(q, rope_angles), apply_rotary(k, rope_angles)
        out = masked_attention(q, k, v, self.mask_mode, self.soft_mask_rate, key_mask)
        return self.proj(out.transpose(1, 2).reshape(batch, num_tokens, embed_dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, mask_mode={self.mask_mode!r}'


__all__ = ['MASK_MODES', 'SelfAttention', 'masked_attention', 'explicit_attention', 'soft_causal_weights',
           'soft_causal_logit_bias']
