"""Learnable absolute position embeddings that follow the actual patch grid."""
from typing import Optional, Sequence

import torch
from mmpretrain.models.utils import resize_pos_embed as _resize_cls_first
from torch import Tensor


def resize_pos_embed(pos_embed: Tensor, src_shape: Sequence[int], dst_shape: Sequence[int],
                     cls_position: Optional[str] = 'first', mode: str = 'bicubic') -> Tensor:
    """Resize a ``(1, h*w [+1], D)`` table from grid ``src_shape`` to ``dst_shape`` (non-square aware).

    The patch rows are interpolated as an image (``align_corners=False``); the class-token row, first or
    last (``cls_position``; ``None`` = no class row), is kept as it is. Wraps mmpretrain's
    ``resize_pos_embed``, which only knows leading extra tokens.
    """
    if cls_position != 'last':
        return _resize_cls_first(pos_embed, src_shape, dst_shape, mode=mode,
                                 num_extra_tokens=int(cls_position == 'first'))
    moved = torch.cat((pos_embed[:, -1:], pos_embed[:, :-1]), dim=1)
    resized = _resize_cls_first(moved, src_shape, dst_shape, mode=mode, num_extra_tokens=1)
    return torch.cat((resized[:, 1:], resized[:, :1]), dim=1)
