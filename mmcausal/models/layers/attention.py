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
    causal. The released iLLaMA weights were trained with it. It needs the full row normaliser; for
    ``alpha < 1`` :func:`soft_mask_attention` computes it exactly with one SDPA call over every key twice
    (no ``(B, heads, N, N)`` tensor is kept).


Every mode also adds an optional ``attn_bias`` to the logits (a boolean key mask or a float bias such as a
learnable decay), still through SDPA. Analysis reads the weights through each mixer's
:class:`~.probes.AttentionProbe` under :func:`~.probes.explicit_attention_mode`; nothing needs to patch a model. The
RoPE rotation of q and k runs through :class:`~.fast_paths.RotatedHeads` where autograd does not need the angles.
"""
import functools
from typing import (
    Optional,
    Tuple,
    Type,
    Union,
)

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from .fast_paths import RotatedHeads
from .position import TokenLayout, rotate_pairs, rotation_table
from .probes import EXPLICIT_ATTENTION, AttentionProbe

MASK_MODES = ('bidirectional', 'causal', 'official')


#: a soft-mask rate: a float, or a 0-dim tensor holding a rate strictly between 0 and 1 (what a compiled
#: :class:`SelfAttention` passes, so that a new rate is a new input value rather than a new graph)
Alpha = Union[float, Tensor]


class AttentionConfigError(UserInputError, ValueError):
    """An invalid attention setting in a config (unknown ``mask_mode``, ``embed_dims`` not divisible by heads)."""


def check_head_split(embed_dims: int, num_heads: int,
                     error_cls: Type[UserInputError] = AttentionConfigError) -> int:
    """``head_dim = embed_dims / num_heads`` of a multi-head mixer; ``error_cls`` (one line) if it is not whole."""
    if num_heads < 1 or embed_dims % num_heads:
        raise error_cls(f'embed_dims ({embed_dims}) must be divisible by num_heads ({num_heads}).')
    return embed_dims // num_heads


def soft_causal_weights(num_tokens: int, alpha: Alpha, device: torch.device,
                        dtype: torch.dtype = torch.float32) -> Tensor:
    """iLLaMA soft mask ``S = alpha * 1 + (1 - alpha) * tril`` (paper Eq. 2), shape ``(N, N)``.

    A float ``alpha`` is cached: every block of a forward pass asks for the same ``(N, alpha)``; treat the result as
    read-only. A tensor ``alpha`` (0-dim; a compiled :class:`SelfAttention`'s rate) is read at every call, and so
    is every table traced into a graph (``torch.compile`` / ``torch.export``: ``N`` may be symbolic).
    """
    if isinstance(alpha, Tensor) or torch.compiler.is_compiling():
        return _soft_causal_weights(num_tokens, alpha, device, dtype)
    return _cached_soft_causal_weights(num_tokens, alpha, device, dtype)


def soft_causal_logit_bias(num_tokens: int, alpha: Alpha, device: torch.device,
                           dtype: torch.dtype = torch.float32) -> Tensor:
    """Additive bias ``log S``: 0 on and below the diagonal, ``log(alpha)`` above it, shape ``(N, N)`` (cached for a
    float ``alpha``, as :func:`soft_causal_weights`)."""
    if isinstance(alpha, Tensor) or torch.compiler.is_compiling():
        return _soft_causal_weights(num_tokens, alpha, device, dtype).log()
    return _cached_soft_causal_logit_bias(num_tokens, alpha, device, dtype)


def _soft_causal_weights(num_tokens: int, alpha: Alpha, device: torch.device, dtype: torch.dtype) -> Tensor:
    tril = torch.ones(num_tokens, num_tokens, device=device, dtype=dtype).tril()
    return alpha + (1. - alpha) * tril


# Built outside inference mode so a table first made under ``torch.inference_mode`` still serves training.
@functools.lru_cache(maxsize=4)
def _cached_soft_causal_weights(num_tokens: int, alpha: float, device: torch.device, dtype: torch.dtype) -> Tensor:
    with torch.inference_mode(False):
        return _soft_causal_weights(num_tokens, alpha, device, dtype)


@functools.lru_cache(maxsize=4)
def _cached_soft_causal_logit_bias(num_tokens: int, alpha: float, device: torch.device, dtype: torch.dtype) -> Tensor:
    with torch.inference_mode(False):
        return _cached_soft_causal_weights(num_tokens, alpha, device, dtype).log()


def soft_mask_key_bias(num_tokens: int, device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    """Logit bias ``(N, 2N)`` of :func:`soft_mask_attention`: query ``t`` sees the first copy of key ``s`` for
    ``s <= t`` and the second copy for ``s > t`` (``-inf`` elsewhere). Cached and shared by every block (one
    tensor kept for backward, not one per block); treat it as read-only. A float table, not a boolean mask: SDPA
    turns a boolean mask into a new float tensor on every call, which each block would then keep for backward.
    Traced into a graph (``torch.compile`` / ``torch.export``) it is built in the graph, for a symbolic ``N``."""
    if torch.compiler.is_compiling():
        return _soft_mask_key_bias(num_tokens, device, dtype)
    with torch.inference_mode(False):
        return _cached_soft_mask_key_bias(num_tokens, device, dtype)


def _soft_mask_key_bias(num_tokens: int, device: torch.device, dtype: torch.dtype) -> Tensor:
    past = torch.ones(num_tokens, num_tokens, device=device, dtype=torch.bool).tril()
    visible = torch.cat((past, ~past), dim=1)
    return torch.zeros(visible.shape, device=device, dtype=dtype).masked_fill(~visible, float('-inf'))


_cached_soft_mask_key_bias = functools.lru_cache(maxsize=4)(_soft_mask_key_bias)


def soft_mask_attention(q: Tensor, k: Tensor, v: Tensor, alpha: Alpha, attn_bias: Optional[Tensor] = None) -> Tensor:
    """iLLaMA Eq. 2 ``(softmax(q k^T / sqrt(d) + bias) * (alpha + (1 - alpha) * tril)) v`` through SDPA.

    Row ``t`` of the product is ``sum_{s<=t} P_ts v_s + alpha * sum_{s>t} P_ts v_s`` with ``P`` normalised over
    all keys. That is one softmax over the ``2N`` keys ``[k; k]`` with values ``[v; alpha v]`` where query ``t``
    sees the first copy of key ``s`` only for ``s <= t`` and the second only for ``s > t``: each key enters the
    normaliser once, so outputs and gradients equal :func:`explicit_attention` with ``post_softmax_weights``.
    Inputs ``(B, heads, N, head_dim)``; backward keeps ``q``, the doubled ``k``/``v`` and one shared ``(N, 2N)``
    bias, never a ``(B, heads, N, N)`` tensor. ``q`` is copied (token-major, so the output stays token-major too):
    as a view into the fused ``q, k, v`` buffer of :func:`split_heads` it would keep all three widths alive for
    backward, while ``k`` and ``v`` enter only the copies made here.
    """
    num_tokens = q.shape[-2]
    q = q.transpose(1, 2).contiguous().transpose(1, 2)
    bias = soft_mask_key_bias(num_tokens, q.device, q.dtype)
    if attn_bias is not None:
        bias = merge_bias(bias, torch.cat((attn_bias, attn_bias), dim=-1)
                          if attn_bias.shape[-1] == num_tokens else attn_bias)
    return F.scaled_dot_product_attention(q, torch.cat((k, k), dim=-2), torch.cat((v, v * alpha), dim=-2),
                                          attn_mask=bias)


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, *, logit_bias: Optional[Tensor] = None,
                       post_softmax_weights: Optional[Tensor] = None,
                       probe: Optional[nn.Module] = None) -> Tensor:
    """Reference attention ``(softmax(q k^T / sqrt(d) + bias) * W) v`` on ``(B, heads, N, head_dim)`` inputs.

    ``logit_bias`` is additive (float) or a boolean mask (True = attend). Materialises the
    ``(B, heads, Nq, Nk)`` score matrix: use it only where SDPA cannot express the math, or to read the weights
    (``probe`` receives them).
    """
    scores = (q * (q.shape[-1] ** -0.5)) @ k.transpose(-2, -1)
    if logit_bias is not None:
        scores = scores.masked_fill(~logit_bias, float('-inf')) if logit_bias.dtype == torch.bool \
            else scores + logit_bias
    weights = scores.softmax(dim=-1)
    if post_softmax_weights is not None:
        weights = weights * post_softmax_weights
    if probe is not None:
        weights = probe(weights)
    return weights @ v


def merge_bias(bias: Tensor, attn_bias: Optional[Tensor]) -> Tensor:
    """Add a float or boolean (True = attend) ``attn_bias`` to the float logit ``bias`` (broadcasting)."""
    if attn_bias is None:
        return bias
    if attn_bias.dtype == torch.bool:
        return bias.masked_fill(~attn_bias, float('-inf'))
    return bias + attn_bias


def split_heads(qkv: Tensor, rope_angles: Optional[Tensor] = None,
                rotation: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
    """Fused projections ``(B, N, 3, heads, head_dim)`` -> ``q, k, v`` ``(B, heads, N, head_dim)``, q and k rotated
    by ``rope_angles`` (``(N, head_dim/2)`` or ``(B, N, head_dim/2)``; None = no RoPE). ``rotation``: its
    ``rotation_table`` when the caller shares one across blocks (:meth:`TokenLayout.rope_rotation`); None = made here.

    The three stay token-major in memory, so SDPA's output is token-major too and merging the heads for the output
    projection is a view, not a copy kept for backward. With RoPE, backward keeps 3 widths per token for q, k, v,
    not the rotated q, k plus the 3-wide fused output. Constant angles go through :class:`RotatedHeads`; angles
    that need a gradient (learnable frequencies), and every call under ``torch.compile`` (which fuses the real
    rotation itself), through autograd's composition of :func:`rotate_pairs`.
    """
    if rope_angles is None:
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)
    if not (rope_angles.requires_grad and torch.is_grad_enabled() or torch.compiler.is_compiling()):
        return RotatedHeads.apply(qkv, (rotation_table(rope_angles) if rotation is None else rotation).unsqueeze(-2))
    qk, v = qkv.split((2, 1), dim=2)
    q, k = rotate_pairs(qk, rope_angles.unsqueeze(-2).unsqueeze(-2)).permute(2, 0, 3, 1, 4).unbind(0)
    return q, k, v.squeeze(2).contiguous().transpose(1, 2)


def masked_attention(q: Tensor, k: Tensor, v: Tensor, mask_mode: str, alpha: Alpha = 0.,
                     attn_bias: Optional[Tensor] = None, probe: Optional[nn.Module] = None) -> Tensor:
    """Dispatch ``(B, heads, N, head_dim)`` q/k/v to the fastest path that implements ``mask_mode`` at ``alpha``
    (a float, or a 0-dim tensor strictly between 0 and 1, see :data:`Alpha`).

    ``attn_bias`` (broadcastable to ``(B, heads, Nq, Nk)``) is added to the logits in every mode: a float bias
    (e.g. a learnable decay ``lambda_h (t - s)``) or a boolean mask (True = attend; window padding). Bidirectional
    and causal attention with any bias stay on SDPA (``'official'`` at ``alpha < 1`` through
    :func:`soft_mask_attention`); only :func:`~.probes.explicit_attention_mode` (with a ``probe``) takes the
    explicit path.
    """
    if mask_mode not in MASK_MODES:  # SelfAttention checks its own mode when built; a direct caller's typo stops here
        check_choice('attention mask_mode', mask_mode, MASK_MODES, AttentionConfigError)
    explicit = probe is not None and EXPLICIT_ATTENTION.get()
    post_softmax_weights = None
    soft = isinstance(alpha, Tensor) or 0. < alpha < 1.
    if mask_mode == 'bidirectional' or not soft and alpha >= 1.:
        logit_bias = attn_bias
    elif mask_mode == 'causal':
        if not soft and attn_bias is None and not explicit:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        logit_bias = merge_bias(soft_causal_logit_bias(q.shape[-2], alpha, q.device, q.dtype), attn_bias)
    elif not explicit:
        return soft_mask_attention(q, k, v, alpha, attn_bias)
    else:
        logit_bias = attn_bias
        post_softmax_weights = soft_causal_weights(q.shape[-2], alpha, q.device, q.dtype)
    if explicit:
        return explicit_attention(q, k, v, logit_bias=logit_bias, post_softmax_weights=post_softmax_weights,
                                  probe=probe)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=logit_bias)


class SelfAttention(nn.Module):
    """Multi-head self-attention with optional RoPE on q/k and a masking mode: the global token mixer.

    ``qkv`` rows are ordered ``[q | k | v]``, each split by head (the timm/iLLaMA layout).

    Args:
        embed_dims: token width ``D``.
        num_heads: number of heads (``D`` must be divisible by it).
        qkv_bias: bias of the fused qkv projection.
        proj_bias: bias of the output projection.
        mask_mode: one of :data:`MASK_MODES` (see module docstring).

    Attributes:
        soft_mask_rate: ``alpha`` in ``[0, 1]``, set at runtime (by the backbone or a hook); mirrored in the
            non-persistent 0-dim buffer ``soft_mask_alpha`` that compiled code reads.
        attn_probe: :class:`~.probes.AttentionProbe` (read the weights under :func:`~.probes.explicit_attention_mode`).
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True, proj_bias: bool = True,
                 mask_mode: str = 'causal') -> None:
        super().__init__()
        self.head_dim = check_head_split(embed_dims, num_heads)
        self.num_heads = num_heads
        self.mask_mode = check_choice('attention mask_mode', mask_mode, MASK_MODES, AttentionConfigError)
        self.register_buffer('soft_mask_alpha', torch.zeros(()), persistent=False)
        self.soft_mask_rate = 0.
        self.qkv = nn.Linear(embed_dims, 3 * embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims, bias=proj_bias)
        self.attn_probe = AttentionProbe()

    @property
    def soft_mask_rate(self) -> float:
        """``alpha`` in ``[0, 1]``; set between iterations by the backbone or a hook."""
        return self._soft_mask_rate

    @soft_mask_rate.setter
    def soft_mask_rate(self, alpha: float) -> None:
        self._soft_mask_rate = float(alpha)
        self._soft_mask_soft = 0. < alpha < 1.
        with torch.no_grad():
            self.soft_mask_alpha.fill_(alpha)

    def _alpha(self) -> Alpha:
        """The rate for :func:`masked_attention`: the float in eager code (its tables are cached per value). Under
        ``torch.compile`` a rate strictly between 0 and 1 is the 0-dim buffer ``soft_mask_alpha``, a graph input, so
        a new rate every iteration reuses the graph (the compiler guards only on whether the rate is soft)."""
        if torch.compiler.is_compiling() and self._soft_mask_soft:
            return self.soft_mask_alpha
        return self._soft_mask_rate

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        """``x`` ``(B, N, D)`` -> ``(B, N, D)``, rotated by the layout's sequence angles (if any)."""
        if layout is None or layout.angles is None:
            return self.attend(x)
        return self.attend(x, layout.angles, rotation=layout.rope_rotation())

    def attend(self, x: Tensor, rope_angles: Optional[Tensor] = None, attn_bias: Optional[Tensor] = None,
               rotation: Optional[Tensor] = None) -> Tensor:
        """Attention over the ``N`` tokens of ``x`` ``(B, N, D)``.

        Args:
            rope_angles: ``(N, head_dim/2)`` or ``(B, N, head_dim/2)``; None = no RoPE.
            attn_bias: optional float bias / boolean mask, see :func:`masked_attention`.
            rotation: ``rotation_table(rope_angles)`` shared across blocks, see :func:`split_heads`.
        """
        q, k, v = self.project_heads(x, rope_angles, rotation)
        return self.merge_heads(masked_attention(q, k, v, self.mask_mode, self._alpha(), attn_bias,
                                                 probe=self.attn_probe))

    def project_heads(self, x: Tensor, rope_angles: Optional[Tensor] = None,
                      rotation: Optional[Tensor] = None) -> Tuple[Tensor, Tensor, Tensor]:
        """``x`` ``(B, N, D)`` through ``qkv`` -> ``q, k, v`` ``(B, heads, N, head_dim)``, q/k rotated as
        :func:`split_heads`."""
        batch, num_tokens, _ = x.shape
        return split_heads(self.qkv(x).view(batch, num_tokens, 3, self.num_heads, self.head_dim), rope_angles,
                           rotation)

    def merge_heads(self, out: Tensor) -> Tensor:
        """Per-head outputs ``(B, heads, N, head_dim)`` -> ``proj`` of their concatenation ``(B, N, D)``."""
        batch, _, num_tokens, _ = out.shape
        return self.proj(out.transpose(1, 2).reshape(batch, num_tokens, -1))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, mask_mode={self.mask_mode!r}'
