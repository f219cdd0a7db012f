"""Where the class token sits in the sequence, the helpers that respect it, and the token -> map conversion.

iLLaMA (and De-focus) put the class token *after* the patches ("post-sequence [cls]") so that, under a
causal mask, it is the only token that sees the whole image; ViT/CaiT put it first.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

CLS_POSITIONS = ('first', 'last')


def cls_position_for(mask_mode: str) -> str:
    """Where a backbone that follows its mask puts the class token: ``'first'`` (ViT) under ``'bidirectional'``
    attention, where every slot sees every token, and ``'last'`` under a causal mask (``'causal'``,
    ``'official'``), the only slot that sees every patch."""
    return 'first' if mask_mode == 'bidirectional' else 'last'


def insert_cls_token(patches: Tensor, cls_token: Tensor, position: str) -> Tensor:
    """``patches`` ``(B, N, D)`` + ``cls_token`` ``(1, 1, D)`` -> ``(B, N + 1, D)`` with cls first or last."""
    cls_tokens = cls_token.expand(patches.shape[0], -1, -1)
    pieces = (cls_tokens, patches) if position == 'first' else (patches, cls_tokens)
    return torch.cat(pieces, dim=1)


def split_cls_token(tokens: Tensor, position: Optional[str]) -> Tuple[Tensor, Optional[Tensor]]:
    """Inverse of :func:`insert_cls_token`: ``(B, N + 1, D) -> (patches (B, N, D), cls (B, D))``.

    ``position=None`` means the sequence has no class token (cls is returned as ``None``).
    """
    if position is None:
        return tokens, None
    if position == 'first':
        return tokens[:, 1:], tokens[:, 0]
    return tokens[:, :-1], tokens[:, -1]


def tokens_to_featmap(tokens: Tensor, grid: Tuple[int, int]) -> Tensor:
    """``(B, H*W, D)`` patch tokens in raster order -> a contiguous ``(B, D, H, W)`` feature map.

    Contiguous on purpose: ``tokens.transpose(1, 2).reshape(...)`` is a view with channels-last strides, convolutions
    propagate that layout to the neck's outputs, and mmcv's compiled ops (``RoIAlign`` in every two-stage detector,
    CPU and CUDA) read the raw memory as NCHW without checking strides, so RoI features would be silently scrambled.
    """
    return tokens.transpose(1, 2).reshape(tokens.shape[0], tokens.shape[2], *grid).contiguous()
