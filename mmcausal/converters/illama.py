"""Official iLLaMA checkpoints (github.com/techmonsterwang/iLLaMA, timm layout) -> mmcausal/mmpretrain.

Key map (D = width, H = SwiGLU hidden):

=====================================  ===========================================
official                               mmcausal (``ImageClassifier``)
=====================================  ===========================================
``cls_token`` / ``pos_embed``          ``backbone.cls_token`` / ``backbone.pos_embed`` (cls row last)
``patch_embed.proj.*``                 ``backbone.patch_embed.projection.*``
``blocks.i.norm{1,2}.weight``          ``backbone.layers.i.norm{1,2}.weight``
``blocks.i.attn.{qkv,proj}.*``         ``backbone.layers.i.attn.{qkv,proj}.*``
``blocks.i.mlp.fc1`` + ``fc3``         ``backbone.layers.i.ffn.w12.weight`` = ``[fc1 (gate, SiLU); fc3 (up)]``
``blocks.i.mlp.fc2``                   ``backbone.layers.i.ffn.w3.weight``
``norm.weight``                        ``backbone.norm.weight``
``head.*``                             ``head.fc.*``
(none)                                 ``backbone.mask_mode`` = ``'official'`` (see below)
=====================================  ===========================================

The released weights were trained with the post-softmax soft mask (``mask_mode='official'``); the converted
file records it, so loading it into an ``ILLaMA`` with another ``mask_mode`` warns.
"""
import re
from typing import Dict

import torch
from torch import Tensor

from mmcausal.models.layers.mask_mode import MASK_MODE_KEY, encode_mask_mode
from .common import rename_key

OFFICIAL_MASK_MODE = 'official'  # the soft mask (paper Eq. 2) of the released iLLaMA training code

_RENAMES = (
    (r'^cls_token$', 'backbone.cls_token'),
    (r'^pos_embed$', 'backbone.pos_embed'),
    (r'^patch_embed\.proj\.', 'backbone.patch_embed.projection.'),
    (r'^blocks\.(\d+)\.(norm1|norm2|attn\.qkv|attn\.proj)\.', r'backbone.layers.\1.\2.'),
    (r'^blocks\.(\d+)\.mlp\.fc2\.', r'backbone.layers.\1.ffn.w3.'),
    (r'^norm\.', 'backbone.norm.'),
    (r'^head\.', 'head.fc.'),
)
_GATE = re.compile(r'^blocks\.(\d+)\.mlp\.fc1\.weight$')


def convert_illama(official: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Map an official iLLaMA state dict to mmcausal keys; raises ``KeyError`` on any key it does not know."""
    converted: Dict[str, Tensor] = {}
    for key, value in official.items():
        gate = _GATE.match(key)
        if gate:
            up_key = f'blocks.{gate.group(1)}.mlp.fc3.weight'
            converted[f'backbone.layers.{gate.group(1)}.ffn.w12.weight'] = torch.cat([value, official[up_key]])
            continue
        if re.match(r'^blocks\.\d+\.mlp\.fc3\.weight$', key):
            continue  # fused with fc1 above
        new_key = rename_key(key, _RENAMES)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r} in the iLLaMA checkpoint; is this an official iLLaMA file?')
        converted[new_key] = value
    converted[f'backbone.{MASK_MODE_KEY}'] = encode_mask_mode(OFFICIAL_MASK_MODE)
    return converted
