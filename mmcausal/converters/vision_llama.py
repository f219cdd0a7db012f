"""Official VisionLLaMA MAE checkpoints (github.com/Meituan-AutoML/VisionLLaMA, mmpretrain fork) -> mmcausal.

The released ``VisionLLaMA-{Base,Large}-MAE/epoch_*.pth`` files are mmengine checkpoints of the official
``MAELLaMA`` pre-training model; the weights sit under ``state_dict`` (:func:`load_source_state_dict`
unwraps it). Key map (i = layer, C = width, H = SwiGLU hidden, read from ``ffn.w3.weight.shape[1]``):

===========================================  ==========================================================
official (mmengine ``state_dict``)           mmcausal (``VisionLLaMA(layout='official_mae')`` / MAE)
===========================================  ==========================================================
``backbone.cls_token``                       ``backbone.cls_token`` (unused by ``with_cls_token=False``)
``backbone.pos_embed``                       dropped (frozen sin-cos, never added by the official code)
``backbone.patch_embed.projection.*``        ``backbone.patch_embed.projection.*``
``backbone.layers.i.ln1.*``                  ``backbone.layers.i.norm1.*``
``backbone.layers.i.ln2.*``                  ``backbone.layers.i.norm2.*``
``backbone.layers.i.attn.{qkv,proj}.*``      ``backbone.layers.i.attn.{qkv,proj}.*`` (rows ``[q|k|v]``)
``backbone.layers.i.ffn.w12.*``              ``backbone.layers.i.ffn.w12.*`` (``(2H, C)``: ``[gate; up]``)
``backbone.layers.i.ffn.w3.*``               ``backbone.layers.i.ffn.w3.*`` (``(C, H)``)
``backbone.ln1.*``                           ``backbone.norm.*`` (final encoder norm)
``backbone.ln2.*`` (fine-tuned files only)   ``backbone.pool_norm.*`` (norm of the pooled feature; when absent,
                                             a fresh LayerNorm: weight 1, bias 0, as the official fine-tuning)
``neck.*``                                   ``neck.*`` unchanged (stock ``MAEPretrainDecoder`` names)
``head.*``                                   ``head.*`` unchanged
===========================================  ==========================================================

Both sides store the SwiGLU fused with biases, so tensors are only renamed, never reshaped. Fine-tuning
(``with_cls_token=False, final_norm=False``) loads the result with ``prefix='backbone.'``; ``cls_token``
and ``norm.*`` are then unexpected (ignored by a non-strict load), exactly as in the official fine-tuning.
"""
import re
from typing import Dict

import torch
from torch import Tensor

from mmcausal.models.layers import swiglu_hidden_dims
from .common import rename_key

_PARAM = r'\.(weight|bias)$'
_RENAMES = (
    (r'^backbone\.cls_token$', 'backbone.cls_token'),
    (r'^backbone\.patch_embed\.projection' + _PARAM, r'backbone.patch_embed.projection.\1'),
    (r'^backbone\.layers\.(\d+)\.ln1' + _PARAM, r'backbone.layers.\1.norm1.\2'),
    (r'^backbone\.layers\.(\d+)\.ln2' + _PARAM, r'backbone.layers.\1.norm2.\2'),
    (r'^backbone\.layers\.(\d+)\.attn\.(qkv|proj)' + _PARAM, r'backbone.layers.\1.attn.\2.\3'),
    (r'^backbone\.layers\.(\d+)\.ffn\.(w12|w3)' + _PARAM, r'backbone.layers.\1.ffn.\2.\3'),
    (r'^backbone\.ln1' + _PARAM, r'backbone.norm.\1'),
    (r'^backbone\.ln2' + _PARAM, r'backbone.pool_norm.\1'),
    (r'^(neck|head)\.(.+)$', r'\1.\2'),
)
_DROPPED = re.compile(r'^backbone\.pos_embed$')
# the official mmpretrain backbone's arch_zoo: embed_dims -> (arch name, num_layers, num_heads)
_KNOWN_ARCHS = {768: ('base', 12, 12), 1024: ('large', 24, 16)}


def convert_visionllama_mae(official: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Map the ``state_dict`` of an official VisionLLaMA MAE checkpoint to mmcausal keys.

    Raises:
        KeyError: on any key the official MAE model does not have (naming the key).
        ValueError: if no encoder layer is found or the FFN shapes are inconsistent (see
            :func:`describe_visionllama_mae`).
    """
    converted: Dict[str, Tensor] = {}
    for key, value in official.items():
        if _DROPPED.match(key):
            continue
        new_key = rename_key(key, _RENAMES)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r} in the VisionLLaMA MAE checkpoint; expected the state_dict of '
                           'an official mmengine MAE checkpoint (keys backbone.patch_embed.projection.*, '
                           'backbone.layers.<i>.{ln1,ln2,attn.qkv,attn.proj,ffn.w12,ffn.w3}.*, backbone.ln1.*, '
                           'neck.*, head.*).')
        converted[new_key] = value
    embed_dims = describe_visionllama_mae(converted)['embed_dims']  # validates the shapes
    # The pooled-feature norm of fine-tuning is created fresh by the official code too (its ``ln2``); store
    # that fresh state (LayerNorm's 1 / 0) so every consumer loads the file without missing keys.
    if 'backbone.pool_norm.weight' not in converted:
        converted['backbone.pool_norm.weight'] = torch.ones(embed_dims)
        converted['backbone.pool_norm.bias'] = torch.zeros(embed_dims)
    return converted


def describe_visionllama_mae(state_dict: Dict[str, Tensor]) -> dict:
    """The encoder architecture read from the weights (official or converted keys, with ``backbone.``).

    Returns a dict of plain types: ``embed_dims``, ``num_layers``, ``patch_size``, ``in_channels``,
    ``ffn_hidden_dims`` (``ffn.w3.weight.shape[1]``), ``ffn_bias``, ``official_mae_hidden_dims`` (the
    ``layout='official_mae'`` rule ``round_up(8/3 * 4C, 256)``), ``matches_official_mae``, ``arch`` (the
    arch name when width, depth and FFN all match the official base/large, else ``None``) and ``num_heads``
    (of that arch, else ``None``: the head count is not stored in the weights).
    """
    projection = state_dict.get('backbone.patch_embed.projection.weight')
    if projection is None:
        raise ValueError('No backbone.patch_embed.projection.weight: not a VisionLLaMA MAE checkpoint.')
    embed_dims, in_channels, patch_size = (int(size) for size in projection.shape[:3])
    layer_ids = sorted({int(m.group(1)) for m in map(re.compile(r'^backbone\.layers\.(\d+)\.').match, state_dict)
                        if m})
    if not layer_ids:
        raise ValueError('No backbone.layers.<i>.* weights: not a VisionLLaMA MAE checkpoint.')
    if layer_ids != list(range(len(layer_ids))):
        raise ValueError(f'Encoder layer indices are not contiguous from 0: {layer_ids}.')

    hidden = set()
    for i in layer_ids:
        w12 = state_dict.get(f'backbone.layers.{i}.ffn.w12.weight')
        w3 = state_dict.get(f'backbone.layers.{i}.ffn.w3.weight')
        if w12 is None or w3 is None:
            raise ValueError(f'Layer {i} has no fused SwiGLU (ffn.w12 / ffn.w3); not the official MAE layout.')
        if w12.shape != (2 * w3.shape[1], embed_dims) or w3.shape[0] != embed_dims:
            raise ValueError(f'Layer {i}: ffn.w12 {tuple(w12.shape)} and ffn.w3 {tuple(w3.shape)} do not form a '
                             f'SwiGLU of width {embed_dims} (expected w12 (2H, C) and w3 (C, H)).')
        hidden.add(int(w3.shape[1]))
    if len(hidden) != 1:
        raise ValueError(f'The layers have different SwiGLU widths {sorted(hidden)}.')
    ffn_hidden_dims = hidden.pop()
    ffn_bias = all(f'backbone.layers.{i}.ffn.{name}.bias' in state_dict for i in layer_ids for name in ('w12', 'w3'))
    rule = swiglu_hidden_dims(embed_dims, 16.)
    matches = ffn_hidden_dims == rule and ffn_bias
    known = _KNOWN_ARCHS.get(embed_dims)
    arch = known[0] if known and matches and known[1] == len(layer_ids) else None
    return dict(embed_dims=embed_dims, num_layers=len(layer_ids), patch_size=patch_size, in_channels=in_channels,
                ffn_hidden_dims=ffn_hidden_dims, ffn_bias=ffn_bias, official_mae_hidden_dims=rule,
                matches_official_mae=matches, arch=arch, num_heads=known[2] if arch else None)


def format_architecture(info: dict) -> str:
    """Human-readable summary of :func:`describe_visionllama_mae` with the matching backbone settings."""
    lines = [f'Architecture read from the weights: embed_dims={info["embed_dims"]}, num_layers={info["num_layers"]}, '
             f'patch_size={info["patch_size"]}, in_channels={info["in_channels"]}, '
             f'SwiGLU hidden={info["ffn_hidden_dims"]} ({"with" if info["ffn_bias"] else "without"} biases).']
    if info['matches_official_mae']:
        lines.append(f'The SwiGLU matches layout="official_mae" (round_up(8/3 * 4 * {info["embed_dims"]}, 256) = '
                     f'{info["official_mae_hidden_dims"]}, with biases).')
        if info['arch']:
            lines.append(f'This is the released arch {info["arch"]!r} ({info["num_heads"]} heads): build '
                         f'VisionLLaMA(arch={info["arch"]!r}, layout="official_mae", rope_mode="2d").')
        else:
            lines.append('Not a released arch (the head count is not stored in the weights): build '
                         f'VisionLLaMA(arch=dict(embed_dims={info["embed_dims"]}, num_layers={info["num_layers"]}, '
                         'num_heads=...), layout="official_mae", rope_mode="2d").')
    else:
        lines.append(f'The SwiGLU does NOT match layout="official_mae" (expects {info["official_mae_hidden_dims"]} '
                     'with biases): build VisionLLaMA(layout="official_mae", rope_mode="2d", '
                     f'arch=dict(embed_dims={info["embed_dims"]}, num_layers={info["num_layers"]}, num_heads=..., '
                     f'ffn_hidden_dims={info["ffn_hidden_dims"]}){"" if info["ffn_bias"] else ", ffn_bias=False"}).')
    return '\n'.join(lines)
