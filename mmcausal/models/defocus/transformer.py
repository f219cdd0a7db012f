"""De-focus ViT's token mixer: causal softmax attention through a learnable band-pass filter (De-focus Attention
Networks, Tao et al. 2024; paper-derived, no official code exists).

Per head ``h`` the logit of query ``t`` and key ``s <= t`` gets a decay bias ``lambda_h (t - s)`` with
``lambda_h = -exp(lambda_hat_h)`` (the paper's parameterisation, Sec. 5.1) and q/k are rotated by a RoPE with learnable
frequencies (:class:`~.backbone.LearnableRoPE`, paired):
``y_t = sum_{s<=t} softmax_s(q_t^T R(theta (t - s)) k_s / sqrt(d) + lambda_h (t - s)) v_s``.
This is one reading of the paper's Eq. 8 (the decay multiplies the *un-normalised* weight ``exp(logit)``, an
ALiBi-style bias with a learnable slope); read literally, Eq. 8 puts ``e^{lambda (t - s)}`` inside the logit as a
factor (xPos-style). Neither is verified against code.

:class:`DefocusViT` and :class:`DefocusRetNet` (:class:`DefocusTransformer`: ViT-B-sized pre-norm blocks with
LayerNorm and a GELU MLP) around :class:`DecayAttention` (Eq. 8) or :class:`~.retention.MultiScaleRetention` (Eq. 4).
"""
import inspect
import math
from functools import partial
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmcausal.registry import MODELS
from ..layers import (
    EXPLICIT_ATTENTION,
    BackboneConfigError,
    SelfAttention,
    TokenLayout,
    TransformerBlock,
    gelu_mlp,
    masked_attention,
)
from .backbone import DefocusBackbone, LearnableDecay, LearnableRoPE, ScaleFactor, decay_bias
from .retention import MultiScaleRetention

#: Largest ``|lambda| * (N - 1)`` for which the fp32 fast path folds the decay into q/k (its logit error is about
#: this value times 2^-24, i.e. <= 6e-5); stronger decays go through SDPA with the (heads, N, N) float bias.
FOLD_LIMIT = 2. ** 10


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
    """De-focus ViT attention (Eq. 8, read as in the module docstring): ``(B, N, D) -> (B, N, D)``, strictly causal.

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
        if EXPLICIT_ATTENTION.get():
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


class DefocusTransformer(DefocusBackbone):
    """De-focus ViT / RetNet (paper-derived: Sec. 4.1, 5.1): a ViT-B-style stack of pre-norm blocks
    ``x + DropPath(Mixer(LN(x)))``, ``x + DropPath(MLP(LN(x)))`` with a strictly causal mixer built by
    :meth:`build_mixer`, class token last, optional learnable position table (cls row last), final LayerNorm.

    Args:
        arch: ``'small' | 'base'`` (DeiT-S / ViT-B sizes) or a dict with ``embed_dims``, ``num_layers``, ``num_heads``
            (optionally ``feedforward_channels``, default ``4 * embed_dims``).
        with_pos_embed: a learnable absolute position table (resized to each input's grid) besides the decay and RoPE.
            On by default: for De-focus ViT the paper's parameter count says so (see :class:`DefocusViT`); RetNet
            follows it (in one 150-step run on the shapes data its class token's features collapsed to a constant
            without the table and not with it; the table alone does not prevent that collapse at a high lr, see the
            RetNet twin config).
        norm_cfg: block and final norm (``LN`` eps 1e-6, as ViT).
        img_size, patch_size, in_channels, delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices,
        out_type, final_norm, drop_path_rate, frozen_stages, with_cp, mask_mode: as :class:`DefocusMamba`.
    """
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=12, num_heads=6),
        ('b', 'base'): dict(embed_dims=768, num_layers=12, num_heads=12),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 delta_scale_factor: ScaleFactor = 1.,
                 rope_scale_factor: ScaleFactor = 1.,
                 patch_rearrange: bool = False,
                 with_pos_embed: bool = True,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 norm_cfg: Optional[dict] = None,
                 drop_path_rate: float = 0.,
                 mask_mode: str = 'causal',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None,
                 **mixer_options) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = self._build_stem(arch, ('embed_dims', 'num_layers', 'num_heads'), in_channels, patch_size, img_size,
                                   delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices, out_type,
                                   final_norm, frozen_stages, mask_mode, with_pos_embed)
        known = set(inspect.signature(self.build_mixer).parameters) - {'embed_dims', 'num_heads'}
        unknown = sorted(set(mixer_options) - known)
        if unknown:
            raise BackboneConfigError(f'{type(self).__name__} got unknown arguments {unknown}; besides the documented '
                                      f'ones, its mixer takes {sorted(known)}.')
        norm_cfg = norm_cfg or dict(type='LN', eps=1e-6)
        mixer = partial(self.build_mixer, num_heads=setting['num_heads'], **mixer_options)
        ffn = partial(gelu_mlp, feedforward_channels=setting.get('feedforward_channels', 4 * self.embed_dims))
        self._build_blocks(partial(TransformerBlock, mixer=mixer, ffn=ffn, norm_cfg=norm_cfg), norm_cfg,
                           drop_path_rate, with_cp)

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, **options) -> nn.Module:
        """The token mixer of one block."""
        raise NotImplementedError


@MODELS.register_module()
class DefocusViT(DefocusTransformer):
    """De-focus ViT (paper Eq. 8, a reconstruction): causal softmax attention with a learnable per-head decay bias
    ``lambda_h (t - s)`` and learnable-frequency RoPE (:class:`DecayAttention`).

    The position table is on by default: the paper's 87.4 M parameters (with the auxiliary head) are DeiT-B's
    86.6 M plus that head (87.34 M with the table, 87.19 M without). ``qkv_bias`` as ViT. Other arguments: see
    :class:`DefocusTransformer`.
    """
    refused_mask_modes = {
        'bidirectional': 'its band-pass decay lambda_h (t - s) is defined for keys s <= t only (a causal 1D order); '
                         'a two-sided decay would be another model; use "causal".',
        'official': "iLLaMA's post-softmax mask needs the softmax over every key, and the decay bias is not defined "
                    'for later keys s > t; use "causal".'}

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, qkv_bias: bool = True) -> nn.Module:
        return DecayAttention(embed_dims, num_heads, qkv_bias=qkv_bias)


@MODELS.register_module()
class DefocusRetNet(DefocusTransformer):
    """De-focus RetNet (paper Eq. 4 with learnable decay and RoPE, a reconstruction): RetNet's multi-scale retention
    (:class:`~.retention.MultiScaleRetention`: ``W_Q, W_K, W_V, W_G, W_O`` of ``D x D``, per-head decay,
    GroupNorm, SiLU gate) in ViT-B-sized blocks with a position table (see ``with_pos_embed``).

    ``retention_chunk_size`` (default 64) sets the chunk-wise form's memory ``O(N T)``; None runs the parallel form.
    Other arguments: see :class:`DefocusTransformer`.
    """
    refused_mask_modes = {
        'bidirectional': "retention's decay matrix is exp(lambda (t - s)) for s <= t and 0 for later keys (its "
                         'chunk-wise recurrent form rests on it); use "causal".',
        'official': "iLLaMA's post-softmax mask applies to softmax attention, and retention has no softmax; use "
                    '"causal".'}

    @staticmethod
    def build_mixer(embed_dims: int, num_heads: int, retention_chunk_size: Optional[int] = 64) -> nn.Module:
        return MultiScaleRetention(embed_dims, num_heads, chunk_size=retention_chunk_size)
