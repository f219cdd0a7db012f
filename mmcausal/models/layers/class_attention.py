"""Class attention (CaiT, Touvron et al. 2021, Sec. 3, Eq. 5-9, and the official ``Class_Attention`` /
``LayerScale_Block_CA``; notes ``cait.md`` §1.4): a class token reads the patch tokens, which stay as they are.

With ``u = [x_cls; x_1 .. x_N]`` and ``z = LN1(u)`` (each CA block's own norm, per token)::

    q = W_q z_cls,  k = W_k z,  v = W_v z              (heads h, head dim d, scale d^-1/2; no talking heads)
    x_cls <- x_cls + g1 * proj(softmax(q k^T / sqrt(d)) v)
    x_cls <- x_cls + g2 * MLP(LN2(x_cls))              (the FFN sees the class token only)

``g1``, ``g2`` are LayerScale vectors. :class:`ClassAttentionStage` stacks such blocks on a learned class token; the
CaiT backbone ends with one, and :class:`~mmcausal.models.necks.ClassAttentionPool` puts one on any backbone.
"""
from functools import partial
from typing import Optional

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule, ModuleList
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from .attention import AttentionProbe, check_head_split, explicit_attention, explicit_attention_requested
from .block import TransformerBlock
from .ffn import gelu_mlp


class ClassAttention(nn.Module):
    """Attention of the first token (the class token) over all tokens: ``(B, 1 + N, C) -> (B, 1, C)``.

    Separate ``q``, ``k``, ``v`` and ``proj`` Linears with biases (the official layout); one SDPA call, O(N). Under
    :func:`explicit_attention_mode` the ``(B, heads, 1, 1 + N)`` weights pass through ``attn_probe``.
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__()
        check_head_split(embed_dims, num_heads)
        self.num_heads = num_heads
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.k = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.v = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.attn_probe = AttentionProbe()

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens`` ``(B, 1 + N, C)`` with the class token first -> its update ``(B, 1, C)``."""
        batch, num_tokens, embed_dims = tokens.shape

        def heads(x: Tensor) -> Tensor:
            return x.view(batch, x.shape[1], self.num_heads, -1).transpose(1, 2)

        q, k, v = heads(self.q(tokens[:, :1])), heads(self.k(tokens)), heads(self.v(tokens))
        out = explicit_attention(q, k, v, probe=self.attn_probe) if explicit_attention_requested() else \
            F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(batch, 1, embed_dims))

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}'


class ClassAttentionBlock(TransformerBlock):
    """One CA block (module docstring): ``(x_cls (B, 1, C), patches (B, N, C)) -> x_cls``; the patches are read,
    never written. Submodules ``norm1``, ``attn`` (:class:`ClassAttention`), ``ls1``, ``norm2``, ``ffn`` (GELU MLP,
    ``mlp_ratio * C`` wide), ``ls2``; drop path 0 (the official CA blocks have none) unless set."""

    def __init__(self, embed_dims: int, num_heads: int, mlp_ratio: float = 4., layer_scale_init_value: float = 1e-5,
                 norm_cfg: Optional[dict] = None) -> None:
        super().__init__(embed_dims, partial(ClassAttention, num_heads=num_heads),
                         partial(gelu_mlp, feedforward_channels=int(mlp_ratio * embed_dims)),
                         norm_cfg=norm_cfg or dict(type='LN', eps=1e-6),
                         layer_scale_init_value=layer_scale_init_value)

    def forward(self, cls_token: Tensor, patches: Tensor) -> Tensor:
        """New class token ``(B, 1, C)`` from the class token and the ``(B, N, C)`` patch tokens."""
        cls_token = self.drop_path.residual(cls_token,
                                            self.ls1(self.attn(self.norm1(torch.cat((cls_token, patches), dim=1)))))
        return self.drop_path.residual(cls_token, self.ls2(self.ffn(self.norm2(cls_token))))


class ClassAttentionStage(BaseModule):
    """A learned class token (``cls_token``, ``(1, 1, C)``) through ``num_layers`` :class:`ClassAttentionBlock` s
    (``layers``) over fixed patch tokens: ``(B, N, C) -> (B, C)``, before any final norm.

    Args:
        embed_dims: ``C``.
        num_heads: heads of the class attention.
        num_layers: CA blocks (2 in every CaiT).
        mlp_ratio: FFN width / ``C``.
        layer_scale_init_value: initial LayerScale.
        norm_cfg: norm of the blocks (LayerNorm, eps 1e-6, by default).
    """

    def __init__(self, embed_dims: int, num_heads: int, num_layers: int = 2, mlp_ratio: float = 4.,
                 layer_scale_init_value: float = 1e-5, norm_cfg: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.layers = ModuleList(
            ClassAttentionBlock(embed_dims, num_heads, mlp_ratio, layer_scale_init_value, norm_cfg)
            for _ in range(num_layers))

    def init_weights(self) -> None:
        """``cls_token`` ~ TruncNormal(0.02) (the official init), then ``init_cfg``."""
        if not self.is_init:
            trunc_normal_(self.cls_token, std=.02)
        super().init_weights()

    def forward(self, patches: Tensor) -> Tensor:
        """``(B, N, C)`` patch tokens -> class feature ``(B, C)``."""
        cls_token = self.cls_token.expand(patches.shape[0], -1, -1)
        for layer in self.layers:
            cls_token = layer(cls_token, patches)
        return cls_token[:, 0]


__all__ = ['ClassAttention', 'ClassAttentionBlock', 'ClassAttentionStage']
