"""DiT / SiT / DiT-LLaMA / SiT-LLaMA checkpoints (facebookresearch/DiT, willisma/SiT, Meituan-AutoML/VisionLLaMA
``dit/`` and ``sit/``) -> a :class:`~mmcausal.models.generation.DiffusionTransformer` under ``network.``.

Released files are flat EMA state dicts (``DiT-XL-2-256x256.pt``, ``SiT-XL-2-256x256.pt``); ``train.py`` files hold
``{'model', 'ema', 'opt', 'args'}`` (sampling uses ``ema``). Key map (i = block):

=============================================  =================================================================
official                                       mmcausal (``network.`` + ...)
=============================================  =================================================================
``x_embedder.proj.*``                          ``patch_embed.projection.*``
``t_embedder.mlp.{0,2}.*``                     unchanged
``y_embedder.embedding_table.weight``          unchanged (row ``num_classes`` = the null label)
``pos_embed`` (1, N, D)                        dropped: DiT's is checked against the recomputed sin-cos table,
                                               the LLaMA variants' is never used
``blocks.i.attn.{qkv,proj}.*``                 ``layers.i.attn.{qkv,proj}.*``
``blocks.i.mlp.fc1.*`` / ``fc2.*`` (DiT)       ``layers.i.ffn.layers.0.0.*`` / ``layers.i.ffn.layers.1.*``
``blocks.i.mlp.c_fc1`` + ``c_fc2`` (LLaMA)     ``layers.i.ffn.w12.weight`` = cat(gate ``c_fc1``, up ``c_fc2``)
``blocks.i.mlp.c_proj.weight`` (LLaMA)         ``layers.i.ffn.w3.weight``
``blocks.i.adaLN_modulation.1.*``              ``layers.i.adaLN_modulation.1.*``
``final_layer.{adaLN_modulation.1,linear}.*``  unchanged
=============================================  =================================================================
"""
import math
import re
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from mmcausal.models.layers import sincos_pos_embed_2d
from .common import rename_key

PREFIX = 'network.'
_PARAM = r'\.(weight|bias)$'
_RENAMES = (
    (r'^x_embedder\.proj' + _PARAM, r'patch_embed.projection.\1'),
    (r'^t_embedder\.mlp\.([02])' + _PARAM, r't_embedder.mlp.\1.\2'),
    (r'^y_embedder\.embedding_table\.weight$', 'y_embedder.embedding_table.weight'),
    (r'^blocks\.(\d+)\.attn\.(qkv|proj)' + _PARAM, r'layers.\1.attn.\2.\3'),
    (r'^blocks\.(\d+)\.mlp\.fc1' + _PARAM, r'layers.\1.ffn.layers.0.0.\2'),
    (r'^blocks\.(\d+)\.mlp\.fc2' + _PARAM, r'layers.\1.ffn.layers.1.\2'),
    (r'^blocks\.(\d+)\.mlp\.c_proj\.weight$', r'layers.\1.ffn.w3.weight'),
    (r'^blocks\.(\d+)\.adaLN_modulation\.1' + _PARAM, r'layers.\1.adaLN_modulation.1.\2'),
    (r'^final_layer\.(adaLN_modulation\.1|linear)' + _PARAM, r'final_layer.\1.\2'),
)
_SWIGLU = re.compile(r'^blocks\.(\d+)\.mlp\.c_fc([12])\.weight$')
#: (embed_dims, depth) -> (arch name, heads): Table 18 of the paper
_ARCHS = {(384, 12): ('small', 6), (768, 12): ('base', 12), (1024, 24): ('large', 16), (1152, 28): ('xlarge', 16)}


def convert_dit(official: Dict[str, Tensor], prefix: str = PREFIX) -> Dict[str, Tensor]:
    """Map an official state dict (DiT, SiT or their LLaMA variants) to mmcausal keys under ``prefix``.

    Raises:
        KeyError: on a key none of the four models has (naming it).
        ValueError: a DiT ``pos_embed`` that is not the fixed sin-cos table, or a SwiGLU missing one half.
    """
    converted: Dict[str, Tensor] = {}
    swiglu: Dict[str, Dict[str, Tensor]] = {}
    for key, value in official.items():
        if key == 'pos_embed':
            continue
        match = _SWIGLU.match(key)
        if match:
            swiglu.setdefault(match.group(1), {})[match.group(2)] = value
            continue
        new_key = rename_key(key, _RENAMES)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r}: not a DiT / SiT / DiT-LLaMA / SiT-LLaMA state dict (keys '
                           'x_embedder.*, t_embedder.*, y_embedder.*, pos_embed, blocks.<i>.*, final_layer.*).')
        converted[prefix + new_key] = value
    for block, halves in swiglu.items():
        if set(halves) != {'1', '2'}:
            raise ValueError(f'Block {block} has only one of mlp.c_fc1 / mlp.c_fc2 (the SwiGLU gate and up halves).')
        converted[f'{prefix}layers.{block}.ffn.w12.weight'] = torch.cat((halves['1'], halves['2']), dim=0)
    if 'pos_embed' in official and not swiglu:
        _check_sincos_table(official['pos_embed'])
    return converted


def _check_sincos_table(pos_embed: Tensor) -> None:
    side = math.isqrt(pos_embed.shape[1])
    if pos_embed.dim() != 3 or side * side != pos_embed.shape[1]:
        raise ValueError(f'pos_embed of shape {tuple(pos_embed.shape)} is not a (1, N, D) table of a square grid.')
    expected = sincos_pos_embed_2d((side, side), pos_embed.shape[2])
    if not torch.allclose(pos_embed[0].float(), expected, atol=1e-5):
        raise ValueError('pos_embed is not the fixed 2-D sin-cos table of DiT, which the converted network '
                         'recomputes; this file was not trained with it.')


def source_tokens(official: Dict[str, Tensor]) -> Optional[int]:
    """The number of patch tokens of the training resolution (``pos_embed``'s N), if the file has the table."""
    return int(official['pos_embed'].shape[1]) if 'pos_embed' in official else None


def describe_dit(converted: Dict[str, Tensor], num_tokens: Optional[int] = None,
                 prefix: str = PREFIX) -> Tuple[dict, str]:
    """The architecture read from converted weights: ``(meta of plain types, a summary naming the network to
    build)``. ``num_tokens``: the source's ``pos_embed`` length (gives ``input_size``)."""
    projection = converted.get(prefix + 'patch_embed.projection.weight')
    if projection is None:
        raise ValueError(f'No {prefix}patch_embed.projection.weight: not a converted diffusion transformer.')
    embed_dims, in_channels, patch_size = (int(size) for size in projection.shape[:3])
    depth = len({key.split('.')[2] for key in converted if key.startswith(prefix + 'layers.')})
    block = 'llama' if f'{prefix}layers.0.ffn.w12.weight' in converted else 'dit'
    out_rows = int(converted[prefix + 'final_layer.linear.weight'].shape[0])
    out_channels = out_rows // (patch_size * patch_size)
    if out_channels not in (in_channels, 2 * in_channels) or out_rows % (patch_size * patch_size):
        raise ValueError(f'final_layer.linear has {out_rows} rows: not {in_channels} or {2 * in_channels} channels '
                         f'per pixel of a patch-{patch_size} network.')
    table_rows = int(converted[prefix + 'y_embedder.embedding_table.weight'].shape[0])
    arch, num_heads = _ARCHS.get((embed_dims, depth), (None, None))
    side = math.isqrt(num_tokens) if num_tokens else None
    info = dict(block=block, arch=arch, embed_dims=embed_dims, num_layers=depth, num_heads=num_heads,
                patch_size=patch_size, in_channels=in_channels, learn_sigma=out_channels == 2 * in_channels,
                num_classes=table_rows - 1, input_size=side * patch_size if side else None)
    name = {'llama': 'DiT-LLaMA / SiT-LLaMA', 'dit': 'DiT / SiT'}[block]
    arch_arg = repr(arch) if arch else f'dict(embed_dims={embed_dims}, num_layers={depth}, num_heads=...)'
    size = f', input_size={info["input_size"]}' if side else ''
    text = (f'{name} blocks, {depth} x {embed_dims} ({arch or "not a paper size; the head count is not stored"}), '
            f'patch {patch_size}, {in_channels} latent channels, learn_sigma={info["learn_sigma"]}, '
            f'{table_rows} label rows (taken as {table_rows - 1} classes + the null label).\n'
            f'Build DiffusionTransformer(arch={arch_arg}, patch_size={patch_size}, block={block!r}, '
            f'in_channels={in_channels}{size}, learn_sigma={info["learn_sigma"]}, '
            f'num_classes={table_rows - 1}) with GaussianDiffusion (DiT) or LinearInterpolant (SiT): the weights do '
            'not say which objective trained them.')
    return info, text


__all__ = ['convert_dit', 'describe_dit', 'source_tokens']
