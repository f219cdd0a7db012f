"""The registry of drawing styles and the per-image random streams.

A style is a module with ``render_classification(rng, image_size, label) -> PIL image`` and
``render_scene(rng, image_size, layout) -> (PIL image, [PaintedShape])`` for ``layout`` ``'ade20k'`` or ``'coco'``.
"""
from types import ModuleType

import numpy as np

from . import style_v1, style_v2, style_v3

STYLES = ('v1', 'v2', 'v3')
_MODULES = dict(v1=style_v1, v2=style_v2, v3=style_v3)
SPLITS = ('train', 'val')
_DATASET_IDS = {'imagenet': 0, 'ade20k': 1, 'coco': 2, 'cifar': 4, 'captions': 5}  # 3: the cue-conflict set's


def get_style(style: str) -> ModuleType:
    """Return the module drawing ``style``; raise ``ValueError`` for an unknown one."""
    if style not in STYLES:
        raise ValueError(f'style must be one of {STYLES}, got {style!r}.')
    return _MODULES[style]


def image_rng(seed: int, dataset: str, split: str, index: int, style: str) -> np.random.Generator:
    """Return the generator of one image, independent of how many other images are generated.

    Styles other than v1 append their index to the seed, so each style is an independent draw.
    """
    entropy = [seed, _DATASET_IDS[dataset], SPLITS.index(split), index]
    return np.random.default_rng(entropy + ([STYLES.index(style)] if style != 'v1' else []))


def style_params(params: dict, style: str) -> dict:
    """Return ``params`` plus ``style`` unless it is the default (so v1 metadata stays as it was)."""
    return params if style == 'v1' else dict(params, style=style)
