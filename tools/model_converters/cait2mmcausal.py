"""Convert an official CaiT checkpoint (deit ``cait_models.py``, or a timm copy) into an mmcausal checkpoint.

    # classification at the released resolution: an ImageClassifier(CaiT, LinearClsHead) checkpoint
    python tools/model_converters/cait2mmcausal.py S24_224.pth checkpoints/cait-s24_in1k-224px.pth
    # everything read from the target config: here dense at 512 px (pos_embed 14x14 -> 32x32; no CA stage/norm/head)
    python tools/model_converters/cait2mmcausal.py S24_224.pth checkpoints/cait-s24_in1k-dense.pth \
        --config configs/cait/upernet_cait-s24_8xb2-160k_ade20k-512x512.py
    # by hand: a dense backbone that keeps the final norm (feature_norm='final'), pos_embed 24x24 -> 40x40
    python tools/model_converters/cait2mmcausal.py --dense --keep-norm --img-size 640 S24_384.pth cait-s24-640px.pth

The source is an official deit file (``{'model': {'module.' + key: tensor}}``) or a timm file (flat, clean keys);
it is read without running any of its code. The output keeps the ``backbone.`` / ``head.`` prefixes: classifiers
load it directly, segmentors and detectors with ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')``.

``--config CFG`` reads ``model.backbone`` of the target config: the ``pos_embed`` grid is ``ceil(img_size /
patch_size)``;
``out_type != 'cls_token'`` means dense (the class-attention stage and the head are dropped); the final ``norm`` is
kept with ``feature_norm='final'`` or ``out_type='avg_featmap'``; a ``ClassAttentionPool`` neck receives the
class-attention stage and ``norm`` (as ``neck.*``). ``--img-size`` (patch 16 without a config) overrides the grid;
``--dense`` and ``--keep-norm`` add to what the config says.
"""
import argparse
from typing import Dict, Optional, Tuple

from mmengine.config import Config
from torch import Tensor

from mmcausal.converters import convert_cait, converter_main, describe_cait

OFFICIAL_PATCH_SIZE = 16


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--config', help='target config: grid, dense and norm are read from its model.backbone')
    parser.add_argument('--img-size', type=int, help='target image size (square); pos_embed is resized to its grid')
    parser.add_argument('--dense', action='store_true',
                        help='drop the class-attention stage (cls_token included), head and final norm')
    parser.add_argument('--keep-norm', action='store_true', help='keep the final norm in a dense conversion')


def _pair(size) -> Tuple[int, int]:
    return (int(size), int(size)) if isinstance(size, int) else (int(size[0]), int(size[1]))


def options_from_config(path: str) -> dict:
    """``convert_cait`` keyword arguments for the model of the config at ``path``."""
    model = Config.fromfile(path).model
    backbone = model.get('backbone')
    if backbone is None:
        raise ValueError(f'{path!r} has no model.backbone.')
    img_h, img_w = _pair(backbone.get('img_size', 224))
    patch_h, patch_w = _pair(backbone.get('patch_size', OFFICIAL_PATCH_SIZE))
    out_type = backbone.get('out_type', 'cls_token')
    neck = model.get('neck')
    ca_neck = isinstance(neck, dict) and neck.get('type') in ('ClassAttentionPool', 'mmcausal.ClassAttentionPool')
    # ceil: the backbone pads the image to whole patches
    return dict(grid=(-(-img_h // patch_h), -(-img_w // patch_w)), dense=out_type != 'cls_token' and not ca_neck,
                keep_norm=backbone.get('feature_norm', 'none') == 'final' or out_type == 'avg_featmap',
                ca_neck=ca_neck)


def convert(state_dict: Dict[str, Tensor], args: argparse.Namespace) -> Dict[str, Tensor]:
    options: dict = options_from_config(args.config) if args.config else {}
    grid: Optional[Tuple[int, int]] = options.get('grid')
    if args.img_size:
        patch = OFFICIAL_PATCH_SIZE
        if args.config:
            patch = _pair(Config.fromfile(args.config).model.backbone.get('patch_size', OFFICIAL_PATCH_SIZE))[0]
        grid = (-(-args.img_size // patch), ) * 2
    return convert_cait(state_dict, grid=grid, dense=options.get('dense', False) or args.dense,
                        keep_norm=options.get('keep_norm', False) or args.keep_norm,
                        ca_neck=options.get('ca_neck', False))


if __name__ == '__main__':
    converter_main('cait2mmcausal', __doc__, 'official deit CaiT checkpoint or timm copy (.pth)', convert,
                   describe=describe_cait, add_options=add_options)
