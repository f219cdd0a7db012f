"""Official De-focus Mamba checkpoints (github.com/OpenGVLab/De-focus-Attention-Networks) -> mmcausal.

Classification files hold ``model`` and ``model_ema`` next to the optimizer and a pickled yacs ``CfgNode``
(read without running any code); detection files are flat backbone weights (``convert_cls_to_det.py``) or a
whole mmdet detector (``backbone.``-prefixed). Key map (i = block):

=====================================================  ===================================================
official                                               mmcausal (``ImageClassifier`` / detector)
=====================================================  ===================================================
``patch_embed.proj.*`` / ``patch_embed.projection.*``  ``backbone.patch_embed.projection.*``
``cls_token``                                          ``backbone.cls_token``
``blocks.i.norm.weight``                               ``backbone.layers.i.norm1.weight``
``blocks.i.mixer.freq``                                ``backbone.layers.i.attn.rope.freq``
``blocks.i.mixer.{in_proj,conv1d,x_proj,dt_proj,...}`` ``backbone.layers.i.attn.{...}`` (``A_log``, ``D`` too)
``norm.*``                                             ``backbone.norm.*``
``head.*`` / ``head2.*`` (``.0`` / ``.2`` MLP heads)   ``head.fc.*`` / ``head.aux_fc.*``
=====================================================  ===================================================

A whole official detector (``configs/dino/defocus_mamba_*.py``) also brings its neck, ``SimpleFPN`` with
``LN2d`` norms inside mmcv ``ConvModule`` blocks (mmcv names such a norm ``norm_layer``), which maps onto
:class:`~mmcausal.models.necks.SimpleFeaturePyramid` (i = level 0..3):

- ``neck.fpn1.{0,1,3}.*`` (ConvT, LN2d, ConvT) -> ``neck.branches.0.{0,1,3}.*``;
  ``neck.fpn2.0.*`` (ConvT) -> ``neck.branches.1.*``;
- ``neck.lateral_convs.i.conv.weight`` / ``.norm_layer.*`` -> ``neck.output_convs.i.0.weight`` / ``.1.*``;
- ``neck.fpn_convs.i.conv.weight`` / ``.norm_layer.*`` -> ``neck.output_convs.i.2.weight`` / ``.3.*``;

and the DINO parts (mmdet's own modules on both sides) keep their names: ``bbox_head.``, ``encoder.``,
``decoder.``, ``query_embedding.``, ``memory_trans_*``, ``level_embed``, ``dn_query_generator.``
(:data:`DINO_PARTS`). ``data_preprocessor.*`` entries (none in mmdet's, whose buffers are not saved) are dropped.

``head_rows`` keeps only the given rows of the classifiers' last layer (the official
``convert_22k_to_1k.py`` slice of a 21 841-class model to ImageNet-1k).
"""
from typing import Dict, Optional, Sequence, Tuple

from torch import Tensor

from .common import rename_key

_RENAMES = (
    (r'^patch_embed\.(proj|projection)\.', 'backbone.patch_embed.projection.'),
    (r'^cls_token$', 'backbone.cls_token'),
    (r'^blocks\.(\d+)\.norm\.weight$', r'backbone.layers.\1.norm1.weight'),
    (r'^blocks\.(\d+)\.mixer\.freq$', r'backbone.layers.\1.attn.rope.freq'),
    (r'^blocks\.(\d+)\.mixer\.(in_proj|conv1d|x_proj|dt_proj|out_proj)\.', r'backbone.layers.\1.attn.\2.'),
    (r'^blocks\.(\d+)\.mixer\.(A_log|D)$', r'backbone.layers.\1.attn.\2'),
    (r'^norm\.', 'backbone.norm.'),
    (r'^head\.', 'head.fc.'),
    (r'^head2\.', 'head.aux_fc.'),
)
_NECK_RENAMES = (
    (r'^neck\.fpn1\.([013])\.(weight|bias)$', r'neck.branches.0.\1.\2'),
    (r'^neck\.fpn2\.0\.(weight|bias)$', r'neck.branches.1.\1'),
    (r'^neck\.lateral_convs\.(\d+)\.conv\.weight$', r'neck.output_convs.\1.0.weight'),
    (r'^neck\.lateral_convs\.(\d+)\.norm_layer\.(weight|bias)$', r'neck.output_convs.\1.1.\2'),
    (r'^neck\.fpn_convs\.(\d+)\.conv\.weight$', r'neck.output_convs.\1.2.weight'),
    (r'^neck\.fpn_convs\.(\d+)\.norm_layer\.(weight|bias)$', r'neck.output_convs.\1.3.\2'),
)
#: top-level names of mmdet's DINO modules (the same in the official detector and ours): kept as they are
DINO_PARTS = ('bbox_head.', 'encoder.', 'decoder.', 'query_embedding.', 'memory_trans_', 'level_embed',
              'dn_query_generator.')


def _last_layer_keys(converted: Dict[str, Tensor]) -> Tuple[str, ...]:
    """Weight/bias keys of the last Linear of each classifier (``fc`` or ``fc.2``)."""
    keys = []
    for head in ('head.fc', 'head.aux_fc'):
        prefix = f'{head}.2' if f'{head}.2.weight' in converted else head
        keys += [f'{prefix}.weight', f'{prefix}.bias']
    return tuple(key for key in keys if key in converted)


def convert_defocus(official: Dict[str, Tensor], head_rows: Optional[Sequence[int]] = None) -> Dict[str, Tensor]:
    """Map an official De-focus Mamba state dict to mmcausal keys; ``KeyError`` on any key it does not know."""
    converted: Dict[str, Tensor] = {}
    for key, value in official.items():
        if key.startswith('data_preprocessor.'):
            continue
        if key.startswith(DINO_PARTS):
            converted[key] = value
            continue
        if key.startswith('neck.'):
            new_key = rename_key(key, _NECK_RENAMES)
            if new_key is None:
                raise KeyError(f'Unexpected neck key {key!r} in the De-focus detector checkpoint: expected the '
                               'official SimpleFPN (fpn1/fpn2, lateral_convs/fpn_convs with LN2d norms).')
            converted[new_key] = value
            continue
        if key.startswith('backbone.'):
            key = key[len('backbone.'):]
        new_key = rename_key(key, _RENAMES)
        if new_key is None:
            raise KeyError(f'Unexpected key {key!r} in the De-focus checkpoint; is this an official De-focus Mamba '
                           'file?')
        converted[new_key] = value
    if head_rows is not None:
        rows = list(head_rows)
        if not rows or min(rows) < 0:
            raise ValueError('head_rows must be a non-empty list of class indices >= 0.')
        for key in _last_layer_keys(converted):
            if max(rows) >= converted[key].shape[0]:
                raise ValueError(f'head_rows reach class {max(rows)}, but {key} has {converted[key].shape[0]} rows.')
            converted[key] = converted[key][rows].clone()
    return converted
