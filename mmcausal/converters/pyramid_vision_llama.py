"""Official Pyramid VisionLLaMA checkpoints (deit ``best_checkpoint.pth``) -> mmcausal.

The weights sit under ``model`` next to the optimizer and a pickled argparse ``args``
(:func:`load_source_state_dict` unwraps them without running any code); flat dicts and the dense copies (with
``norm_list``) convert too. Key map (s = stage, j = block):

===========================================  ==============================================================
official                                     mmcausal (``ImageClassifier`` with ``PyramidVisionLLaMA``)
===========================================  ==============================================================
``patch_embeds.s.proj.*``                    ``backbone.stages.s.patch_embed.projection.*``
``patch_embeds.s.norm.*``                    ``backbone.stages.s.patch_embed.norm.*``
``blocks.s.j.{norm1,norm2}.*``               ``backbone.stages.s.blocks.j.{norm1,norm2}.*``
``blocks.s.j.gamma_{1,2}``                   ``backbone.stages.s.blocks.j.ls{1,2}.weight``
``blocks.s.j.attn.{qkv,proj}.*`` (LSA)       ``backbone.stages.s.blocks.j.attn.{qkv,proj}.*``
``blocks.s.j.attn.{q,kv,sr,norm,proj}.*``    ``backbone.stages.s.blocks.j.attn.{q,kv,sr,norm,proj}.*`` (GSA)
``blocks.s.j.mlp.{c_fc1,c_fc2}.weight``      ``backbone.stages.s.blocks.j.ffn.w12.weight`` = ``[c_fc1 (gate); c_fc2]``
``blocks.s.j.mlp.c_proj.weight``             ``backbone.stages.s.blocks.j.ffn.w3.weight``
``norm.*``                                   ``backbone.norm.*`` (final norm; the classifier applies it twice)
``norm_list.s.*`` (dense copies)             ``backbone.stages.s.norm.*``
``head.*``                                   ``head.fc.*``
===========================================  ==============================================================

A checkpoint without ``gamma_*`` (no LayerScale) loads into ``layer_scale_init_value=0``.
"""
from typing import Dict

from torch import Tensor

from .common import rename_with_fused_swiglu

_PARAM = r'\.(weight|bias)$'
_BLOCK = r'^blocks\.(\d+)\.(\d+)\.'
_OURS = r'backbone.stages.\1.blocks.\2.'
_RENAMES = (
    (r'^patch_embeds\.(\d+)\.proj' + _PARAM, r'backbone.stages.\1.patch_embed.projection.\2'),
    (r'^patch_embeds\.(\d+)\.norm' + _PARAM, r'backbone.stages.\1.patch_embed.norm.\2'),
    (_BLOCK + r'(norm1|norm2)' + _PARAM, _OURS + r'\3.\4'),
    (_BLOCK + r'gamma_([12])$', _OURS + r'ls\3.weight'),
    (_BLOCK + r'attn\.(qkv|proj|q|kv|sr|norm)' + _PARAM, _OURS + r'attn.\3.\4'),
    (_BLOCK + r'mlp\.c_proj\.weight$', _OURS + 'ffn.w3.weight'),
    (r'^norm' + _PARAM, r'backbone.norm.\1'),
    (r'^norm_list\.(\d+)' + _PARAM, r'backbone.stages.\1.norm.\2'),
    (r'^head' + _PARAM, r'head.fc.\1'),
)


def convert_pyramid_visionllama(official: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """Map an official Pyramid VisionLLaMA state dict to mmcausal keys (fusing the SwiGLU gate and up).

    Raises:
        KeyError: on a key the official model does not have, or a SwiGLU half without its partner.
    """
    converted = rename_with_fused_swiglu(
        official, _RENAMES, 'the deit Pyramid VisionLLaMA (patch_embeds.<s>.{proj,norm}, blocks.<s>.<j>.{norm1,'
        'norm2,gamma_1,gamma_2,attn.*,mlp.*}, norm, head; norm_list.<s> in the dense copies)')
    if not any(key.startswith('backbone.stages.') for key in converted):
        raise ValueError('No patch_embeds / blocks weights: not a Pyramid VisionLLaMA checkpoint.')
    return converted
