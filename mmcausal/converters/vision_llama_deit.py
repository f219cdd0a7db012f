"""Official supervised plain VisionLLaMA checkpoints (deit ``checkpoint.pth``; github.com/Meituan-AutoML/VisionLLaMA,
``deit/my_models.py``) -> mmcausal.

No such weights were released; the map follows the official model's parameter names and is tested on the state
dict of a re-statement of that model (``tests/reference/official_visionllama.py``). The deit
scripts save ``{'model', 'optimizer', 'lr_scheduler', 'epoch', 'scaler', 'args'}``; :func:`load_source_state_dict`
unwraps ``model``. Key map (i = block):

===========================================  ================================================================
official (deit ``model``)                    mmcausal (``ImageClassifier``: ``VisionLLaMA(layout='official_deit')``
                                             + ``LinearClsHead``)
===========================================  ================================================================
``cls_token``                                ``backbone.cls_token``
``patch_embed.proj.*``                       ``backbone.patch_embed.projection.*``
``blocks.i.{norm1,norm2}.*``                 ``backbone.layers.i.{norm1,norm2}.*`` (LayerNorm, or RMSNorm's weight)
``blocks.i.attn.{qkv,proj}.*``               ``backbone.layers.i.attn.{qkv,proj}.*`` (rows ``[q|k|v]``)
``blocks.i.gamma_{1,2}``                     ``backbone.layers.i.ls{1,2}.weight``
``blocks.i.mlp.{c_fc1,c_fc2}.weight``        ``backbone.layers.i.ffn.w12.weight`` = ``[c_fc1 (gate); c_fc2 (up)]``
``blocks.i.mlp.c_proj.weight``               ``backbone.layers.i.ffn.w3.weight``
``blocks.i.mlp.{fc1,fc2}.*`` (GELU MLP)      ``backbone.layers.i.ffn.layers.{0.0,1}.*`` (``ffn_type='gelu'``)
``norm.*``                                   ``backbone.norm.*`` with a class token; ``backbone.pool_norm.*``
                                             without one (GAP: the official ``norm(mean(x))``)
``head.*``                                   ``head.fc.*``
===========================================  ================================================================

No RoPE table is stored (the official tables are plain attributes), so nothing depends on the resolution.
"""
import re
from typing import Dict, Optional

from torch import Tensor

from .common import rename_key, rename_with_fused_swiglu

_PARAM = r'\.(weight|bias)$'
_BLOCK = r'^blocks\.(\d+)\.'
_OURS = r'backbone.layers.\1.'
_RENAMES = (
    (r'^cls_token$', 'backbone.cls_token'),
    (r'^patch_embed\.proj' + _PARAM, r'backbone.patch_embed.projection.\1'),
    (_BLOCK + r'(norm1|norm2)' + _PARAM, _OURS + r'\2.\3'),
    (_BLOCK + r'attn\.(qkv|proj)' + _PARAM, _OURS + r'attn.\2.\3'),
    (_BLOCK + r'gamma_([12])$', _OURS + r'ls\2.weight'),
    (_BLOCK + r'mlp\.c_proj\.weight$', _OURS + 'ffn.w3.weight'),
    (_BLOCK + r'mlp\.fc1' + _PARAM, _OURS + r'ffn.layers.0.0.\2'),
    (_BLOCK + r'mlp\.fc2' + _PARAM, _OURS + r'ffn.layers.1.\2'),
    (r'^head' + _PARAM, r'head.fc.\1'),
)
_FINAL_NORM = re.compile(r'^norm' + _PARAM)
# the official registrations: embed_dims -> (arch name, depth, heads)
_KNOWN_ARCHS = {384: ('small', 12, 6), 768: ('base', 12, 12), 1024: ('large', 24, 16)}


def convert_visionllama_deit(official: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Map the ``model`` state dict of an official deit VisionLLaMA checkpoint to mmcausal keys.

    Raises:
        KeyError: on a key the official model does not have, or a SwiGLU half without its partner.
        ValueError: if no block is found.
    """
    final_norm = 'backbone.norm' if 'cls_token' in official else 'backbone.pool_norm'

    def rename(key: str) -> Optional[str]:
        match = _FINAL_NORM.match(key)
        return f'{final_norm}.{match.group(1)}' if match else rename_key(key, _RENAMES)

    converted = rename_with_fused_swiglu(
        official, _RENAMES, 'the official supervised deit VisionLLaMA (cls_token, patch_embed.proj, blocks.<i>.{norm1,'
        'norm2,gamma_1,gamma_2,attn.qkv,attn.proj,mlp.*}, norm, head)', rename)
    if not any(key.startswith('backbone.layers.') for key in converted):
        raise ValueError('No blocks.<i>.* weights: not a deit VisionLLaMA checkpoint.')
    return converted


def describe_visionllama_deit(state_dict: Dict[str, Tensor]) -> dict:
    """The architecture read from converted weights: ``embed_dims``, ``num_layers``, ``patch_size``,
    ``with_cls_token``, ``ffn_type``, ``norm`` (``'LN'`` or ``'RMSNorm'``: whether the norms have a bias),
    ``num_classes`` (None without a head) and ``arch`` / ``num_heads`` of the official registration of that
    width and depth (None otherwise: heads are not stored in the weights)."""
    projection = state_dict['backbone.patch_embed.projection.weight']
    embed_dims, patch_size = int(projection.shape[0]), int(projection.shape[2])
    num_layers = len({int(m.group(1)) for m in map(re.compile(r'^backbone\.layers\.(\d+)\.').match, state_dict)
                      if m})
    known = _KNOWN_ARCHS.get(embed_dims)
    arch = known[0] if known and known[1] == num_layers else None
    head = state_dict.get('head.fc.weight')
    return dict(embed_dims=embed_dims, num_layers=num_layers, patch_size=patch_size,
                with_cls_token='backbone.cls_token' in state_dict,
                ffn_type='swiglu' if 'backbone.layers.0.ffn.w12.weight' in state_dict else 'gelu',
                norm='LN' if 'backbone.layers.0.norm1.bias' in state_dict else 'RMSNorm',
                num_classes=None if head is None else int(head.shape[0]), arch=arch,
                num_heads=known[2] if arch else None)


def format_deit_architecture(info: dict) -> str:
    """Human-readable summary of :func:`describe_visionllama_deit` with the matching backbone settings."""
    options = ['layout="official_deit"', 'rope_mode="2d"']
    if info['ffn_type'] == 'gelu':
        options.append('ffn_type="gelu"')
    if info['norm'] == 'RMSNorm':
        options.append('norm_cfg=dict(type="RMSNorm", eps=1e-6)')
    if not info['with_cls_token']:
        options.append('with_cls_token=False, out_type="avg_featmap", final_norm=False')
    arch = repr(info['arch']) if info['arch'] else \
        f'dict(embed_dims={info["embed_dims"]}, num_layers={info["num_layers"]}, num_heads=...)'
    return (f'Architecture read from the weights (deit format): embed_dims={info["embed_dims"]}, '
            f'num_layers={info["num_layers"]}, patch_size={info["patch_size"]}, FFN {info["ffn_type"]}, '
            f'norm {info["norm"]}, {"class token" if info["with_cls_token"] else "average pooling"}, '
            f'{info["num_classes"]} classes.\nBuild VisionLLaMA(arch={arch}, {", ".join(options)}) with a '
            'LinearClsHead (the RoPE settings rope_ratio / rope_shared / rope_theta are not stored in the weights).')
