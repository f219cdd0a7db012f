"""Official CaiT checkpoints (github.com/facebookresearch/deit ``cait_models.py``, or the timm copies) -> mmcausal.

The official files hold ``{'model': {'module.' + key: tensor}}`` (:func:`~mmcausal.converters.load_source_state_dict`
unwraps ``model``; the DDP ``module.`` prefix is stripped here); the timm hub copies hold the same tensors under
the clean keys. Key map (i = self-attention block, j = class-attention block 0/1):

=====================================================  ==========================================================
official / timm                                        mmcausal (``ImageClassifier`` with a ``CaiT`` backbone)
=====================================================  ==========================================================
``patch_embed.proj.*``                                 ``backbone.patch_embed.projection.*``
``pos_embed`` (1, N, C), no class row                  ``backbone.pos_embed`` (resized to ``grid`` if given)
``blocks.i.gamma_1`` / ``gamma_2``                     ``backbone.layers.i.ls1.weight`` / ``ls2.weight``
``blocks.i.norm1.*`` / ``norm2.*``                     ``backbone.layers.i.norm1.*`` / ``norm2.*``
``blocks.i.attn.{qkv,proj,proj_l,proj_w}.*``           ``backbone.layers.i.attn.{qkv,proj,proj_l,proj_w}.*``
``blocks.i.mlp.fc1.*`` / ``mlp.fc2.*``                 ``backbone.layers.i.ffn.layers.0.0.*`` / ``ffn.layers.1.*``
``cls_token``                                          ``backbone.class_attn.cls_token``
``blocks_token_only.j.gamma_1`` / ``gamma_2``          ``backbone.class_attn.layers.j.ls1.weight`` / ``ls2.weight``
``blocks_token_only.j.norm1.*`` / ``norm2.*``          ``backbone.class_attn.layers.j.norm1.*`` / ``norm2.*``
``blocks_token_only.j.attn.{q,k,v,proj}.*``            ``backbone.class_attn.layers.j.attn.{q,k,v,proj}.*``
``blocks_token_only.j.mlp.fc1.*`` / ``mlp.fc2.*``      ``backbone.class_attn.layers.j.ffn.layers.0.0.*`` / ``.1.*``
``norm.*``                                             ``backbone.norm.*``
``head.*``                                             ``head.fc.*`` (mmpretrain ``LinearClsHead``)
=====================================================  ==========================================================

Tensors are only renamed, never reshaped, except ``pos_embed`` with ``grid=(H, W)``: the square source table is
resized bicubically (``align_corners=False``, no class row, as deit's ``--finetune``). ``dense=True`` (a backbone
with ``out_type`` other than ``'cls_token'``, for mmseg/mmdet or a featmap classifier) drops the class-attention
stage (``class_attn.*``, ``cls_token`` included) and ``head.*``, and drops ``norm.*`` unless ``keep_norm``
(``feature_norm='final'`` or ``out_type='avg_featmap'``). ``ca_neck=True`` puts the class-attention stage and
``norm`` under ``neck.`` instead (a ``featmap`` backbone with the ``ClassAttentionPool`` neck), keeping the head.
"""
import math
from typing import Dict, Optional, Sequence, Tuple

from torch import Tensor

from mmcausal.models.cait import CaiT
from mmcausal.models.layers import resize_pos_embed
from .common import rename_key

_RENAMES = (
    (r'^patch_embed\.proj\.(weight|bias)$', r'backbone.patch_embed.projection.\1'),
    (r'^pos_embed$', 'backbone.pos_embed'),
    (r'^cls_token$', 'backbone.class_attn.cls_token'),
    (r'^blocks\.(\d+)\.gamma_([12])$', r'backbone.layers.\1.ls\2.weight'),
    (r'^blocks\.(\d+)\.(norm[12])\.(weight|bias)$', r'backbone.layers.\1.\2.\3'),
    (r'^blocks\.(\d+)\.attn\.(qkv|proj|proj_l|proj_w)\.(weight|bias)$', r'backbone.layers.\1.attn.\2.\3'),
    (r'^blocks\.(\d+)\.mlp\.fc1\.(weight|bias)$', r'backbone.layers.\1.ffn.layers.0.0.\2'),
    (r'^blocks\.(\d+)\.mlp\.fc2\.(weight|bias)$', r'backbone.layers.\1.ffn.layers.1.\2'),
    (r'^blocks_token_only\.(\d+)\.gamma_([12])$', r'backbone.class_attn.layers.\1.ls\2.weight'),
    (r'^blocks_token_only\.(\d+)\.(norm[12])\.(weight|bias)$', r'backbone.class_attn.layers.\1.\2.\3'),
    (r'^blocks_token_only\.(\d+)\.attn\.([qkv]|proj)\.(weight|bias)$', r'backbone.class_attn.layers.\1.attn.\2.\3'),
    (r'^blocks_token_only\.(\d+)\.mlp\.fc1\.(weight|bias)$', r'backbone.class_attn.layers.\1.ffn.layers.0.0.\2'),
    (r'^blocks_token_only\.(\d+)\.mlp\.fc2\.(weight|bias)$', r'backbone.class_attn.layers.\1.ffn.layers.1.\2'),
    (r'^norm\.(weight|bias)$', r'backbone.norm.\1'),
    (r'^head\.(weight|bias)$', r'head.fc.\1'),
)
_DDP_PREFIX = 'module.'
#: (embed_dims, SA depth) -> arch name of the ``CaiT`` backbone
_ARCHS = {(setting['embed_dims'], setting['num_layers']): names[0] for names, setting in CaiT.arch_zoo.items()}


def _resize(pos_embed: Tensor, grid: Sequence[int]) -> Tensor:
    """The ``(1, N, C)`` table of a square source grid resized to ``grid`` (bicubic, no class row)."""
    side = math.isqrt(pos_embed.shape[1])
    if pos_embed.ndim != 3 or side * side != pos_embed.shape[1]:
        raise ValueError(f'pos_embed of shape {tuple(pos_embed.shape)} is not a (1, N, C) table of a square grid.')
    return resize_pos_embed(pos_embed, (side, side), tuple(grid), cls_position=None).contiguous()


def convert_cait(official: Dict[str, Tensor], grid: Optional[Sequence[int]] = None, dense: bool = False,
                 keep_norm: bool = False, ca_neck: bool = False) -> Dict[str, Tensor]:
    """Map an official (or timm) CaiT state dict to mmcausal keys; ``KeyError`` naming any key it does not know.

    Args:
        official: the weights, keys with or without the DDP ``module.`` prefix.
        grid: ``(H, W)`` patch grid of the target model; ``pos_embed`` is resized to it (``None``: kept).
        dense: drop the class-attention stage (``class_attn.*``) and ``head.*``; also ``norm.*`` unless ``keep_norm``.
        keep_norm: keep ``norm.*`` in a dense conversion (``feature_norm='final'`` or ``out_type='avg_featmap'``).
        ca_neck: move ``class_attn.*`` and ``norm.*`` to ``neck.`` (the ``ClassAttentionPool`` neck); not with dense.
    """
    if dense and ca_neck:
        raise ValueError('dense=True drops the class-attention stage that ca_neck=True would keep in the neck.')
    converted: Dict[str, Tensor] = {}
    for key, value in official.items():
        clean = key[len(_DDP_PREFIX):] if key.startswith(_DDP_PREFIX) else key
        new_key = rename_key(clean, _RENAMES)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r} in the CaiT checkpoint; is this an official deit cait_models (or '
                           'timm cait) file?')
        if new_key in converted:
            raise KeyError(f'Key {key!r} appears twice (with and without the {_DDP_PREFIX!r} prefix).')
        if dense and (new_key.startswith(('backbone.class_attn.', 'head.'))
                      or (new_key.startswith('backbone.norm.') and not keep_norm)):
            continue
        if ca_neck and new_key.startswith(('backbone.class_attn.', 'backbone.norm.')):
            new_key = 'neck.' + new_key[len('backbone.'):]
        if new_key == 'backbone.pos_embed' and grid is not None:
            value = _resize(value, grid)
        converted[new_key] = value
    return converted


def describe_cait(converted: Dict[str, Tensor]) -> Tuple[dict, str]:
    """The architecture read from converted weights: ``(meta of plain types, a one-paragraph summary)``."""
    projection = converted.get('backbone.patch_embed.projection.weight')
    if projection is None:
        raise ValueError('No backbone.patch_embed.projection.weight: not a converted CaiT checkpoint.')
    embed_dims, patch_size = int(projection.shape[0]), int(projection.shape[-1])
    num_layers = len({key.split('.')[2] for key in converted if key.startswith('backbone.layers.')})
    heads = converted.get('backbone.layers.0.attn.proj_l.weight')
    num_heads = int(heads.shape[0]) if heads is not None else None
    side = math.isqrt(converted['backbone.pos_embed'].shape[1]) if 'backbone.pos_embed' in converted else None
    arch = _ARCHS.get((embed_dims, num_layers))
    info = dict(arch=arch, embed_dims=embed_dims, num_layers=num_layers, num_heads=num_heads, patch_size=patch_size,
                pos_embed_tokens=int(converted['backbone.pos_embed'].shape[1]) if side is not None else None,
                class_attention=any(key.startswith(('backbone.class_attn.', 'neck.class_attn.')) for key in converted),
                head=any(key.startswith('head.') for key in converted))
    grid = f'{info["pos_embed_tokens"]} position rows' + (f' ({side}x{side})' if side and side * side == info[
        'pos_embed_tokens'] else '')
    text = (f'CaiT {arch or "(not a released arch)"}: embed_dims={embed_dims}, {num_layers} SA blocks, '
            f'{num_heads} heads, patch {patch_size}, {grid}; class-attention stage '
            f'{"kept" if info["class_attention"] else "dropped"}, classifier head '
            f'{"kept" if info["head"] else "dropped"}.')
    return info, text
