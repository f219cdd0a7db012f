"""Test pipelines rescaled to give images of another size, for evaluating a classifier at several resolutions.

:func:`rescale_pipeline` / :func:`rescale_dataloader_cfg` turn a test pipeline into one whose images are exactly
``H x W`` (a size is an int for ``size x size`` or a pair ``(H, W)``). Square sizes: a ``ResizeEdge``/``Resize`` +
``CenterCrop`` pair keeps its resize-to-crop ratio (256/224 stays 256/224), a lone square ``Resize`` goes to
``(size, size)``, and a pipeline without any resize gets a bicubic ``Resize`` to ``(size, size)`` after image
loading. Non-square sizes never stretch the image: it is resized so that its short side covers ``max(H, W)`` (with a
crop: the resize-to-crop ratio is kept for that side) and then centre-cropped to ``H x W``, as a non-square photo of
the same scene would be.
"""
import copy
from typing import List, Sequence, Tuple, Union

RESIZE_TYPES = ('Resize', 'ResizeEdge')
CROP_TYPES = ('CenterCrop', 'EfficientNetCenterCrop')
LOAD_PREFIX = 'LoadImage'
WRAPPER_KEYS = ('dataset', 'datasets')

Size = Union[int, Tuple[int, int]]  # ``size`` (square) or ``(H, W)``


class ResolutionEvalError(ValueError):
    """The model or the pipeline cannot be evaluated at other resolutions (the message says why)."""


def hw(size: Size) -> Tuple[int, int]:
    """``(H, W)`` of a size given as an int (square) or a pair."""
    height, width = (size, size) if isinstance(size, (int, float)) else size
    if int(height) <= 0 or int(width) <= 0:
        raise ResolutionEvalError(f'Image sizes must be positive, got {size}.')
    return int(height), int(width)


def size_label(size: Size) -> str:
    """``'96'`` for a square size, ``'64x96'`` (``H x W``) otherwise."""
    height, width = hw(size)
    return str(height) if height == width else f'{height}x{width}'



def _type(transform: dict) -> str:
    kind = transform.get('type', '')
    return kind.split('.')[-1] if isinstance(kind, str) else getattr(kind, '__name__', '')


def _scaled(value: Union[int, Sequence[int]], ratio: float) -> Union[int, Tuple[int, ...]]:
    if isinstance(value, (int, float)):
        return max(int(round(value * ratio)), 1)
    return tuple(v if v in (-1, None) else max(int(round(v * ratio)), 1) for v in value)


def _side(crop_size: Union[int, Sequence[int]]) -> int:
    if isinstance(crop_size, (int, float)):
        return int(crop_size)
    height, width = crop_size
    if height != width:
        raise ResolutionEvalError(f'The test pipeline crops a non-square {tuple(crop_size)}; this tool rescales '
                                  'pipelines with a square crop only (use CenterCrop(crop_size=S)).')
    return int(height)


def _rescale_non_square(steps: List[dict], kinds: List[str], height: int, width: int) -> List[dict]:
    """Non-square ``H x W``: short side to ``max(H, W)`` (crop pipelines: times resize/crop), centre crop."""
    longer = max(height, width)
    crops = [i for i, kind in enumerate(kinds) if kind in CROP_TYPES]
    resizes = [i for i, kind in enumerate(kinds) if kind in RESIZE_TYPES]
    if crops:
        ratio = longer / _side(steps[crops[-1]]['crop_size'])
        for i in crops:
            steps[i] = dict(type='CenterCrop', crop_size=(width, height))  # mmcv's CenterCrop takes (w, h)
        for i in resizes:
            if i < crops[-1] and steps[i].get('scale') is not None:
                steps[i] = dict(type='ResizeEdge', scale=max(_side_of(steps[i]['scale'], ratio), longer),
                                edge='short', **_resize_options(steps[i]))
        return steps
    crop = dict(type='CenterCrop', crop_size=(width, height))
    if resizes:
        last = resizes[-1]
        steps[last] = dict(type='ResizeEdge', scale=longer, edge='short', **_resize_options(steps[last]))
        steps.insert(last + 1, crop)
        return steps
    loads = [i for i, kind in enumerate(kinds) if kind.startswith(LOAD_PREFIX)]
    at = loads[-1] + 1 if loads else 0
    steps[at:at] = [dict(type='ResizeEdge', scale=longer, edge='short', backend='pillow', interpolation='bicubic'),
                    crop]
    return steps


def _resize_options(transform: dict) -> dict:
    return {k: transform[k] for k in ('backend', 'interpolation') if k in transform}


def _side_of(scale: Union[int, Sequence[int]], ratio: float) -> int:
    """The short-edge target of a resize ``scale`` (an int, or the smaller positive side of a pair) x ratio."""
    sides = [scale] if isinstance(scale, (int, float)) else [v for v in scale if v not in (-1, None)]
    return max(int(round(min(sides) * ratio)), 1)


def rescale_pipeline(pipeline: Sequence[dict], size: Size) -> List[dict]:
    """A copy of the test ``pipeline`` whose output images are ``size x size`` (or ``H x W``, see below).

    Non-square ``size=(H, W)``: see the module docstring (short side to ``max(H, W)``, centre crop; never a
    stretch). Square sizes:

    * With a ``CenterCrop`` (or ``EfficientNetCenterCrop``): the crop becomes ``size`` and every
      ``Resize``/``ResizeEdge`` before it is scaled by ``size / crop``, i.e. the resize-to-crop ratio is kept.
    * Without a crop: a ``Resize`` with ``keep_ratio=False`` becomes ``scale=(size, size)``; a ``ResizeEdge``
      (or a keep-ratio ``Resize``) becomes a short-edge resize to ``size`` followed by ``CenterCrop(size)``.
    * Without any resize or crop: ``Resize(scale=(size, size), bicubic)`` is inserted after image loading.
    """
    height, width = hw(size)
    steps = [copy.deepcopy(dict(t)) for t in pipeline]
    kinds = [_type(t) for t in steps]
    if height != width:
        return _rescale_non_square(steps, kinds, height, width)
    size = height
    crops = [i for i, kind in enumerate(kinds) if kind in CROP_TYPES]
    resizes = [i for i, kind in enumerate(kinds) if kind in RESIZE_TYPES]
    if crops:
        last_crop = crops[-1]
        ratio = size / _side(steps[last_crop]['crop_size'])
        for i in crops:
            steps[i]['crop_size'] = size
        for i in resizes:
            if i < last_crop and steps[i].get('scale') is not None:
                steps[i]['scale'] = _scaled(steps[i]['scale'], ratio)
        return steps
    if resizes:
        last = resizes[-1]
        old = steps[last]
        keep = _resize_options(old)
        if kinds[last] == 'Resize' and not old.get('keep_ratio', False):
            steps[last] = dict(type=old['type'], scale=(size, size), **keep)
            return steps
        steps[last] = dict(type='ResizeEdge', scale=size, edge='short', **keep)
        steps.insert(last + 1, dict(type='CenterCrop', crop_size=size))
        return steps
    loads = [i for i, kind in enumerate(kinds) if kind.startswith(LOAD_PREFIX)]
    at = loads[-1] + 1 if loads else 0
    steps.insert(at, dict(type='Resize', scale=(size, size), backend='pillow', interpolation='bicubic'))
    return steps


def _rescale_dataset(dataset: dict, size: Size) -> None:
    inner = [dataset[key] for key in WRAPPER_KEYS if key in dataset]
    if 'pipeline' in dataset or not inner:
        dataset['pipeline'] = rescale_pipeline(dataset.get('pipeline') or [], size)
    for child in inner:
        for item in (child if isinstance(child, (list, tuple)) else [child]):
            _rescale_dataset(item, size)


def rescale_dataloader_cfg(dataloader_cfg: dict, size: Size) -> dict:
    """A copy of a dataloader config whose dataset(s) (wrappers included) produce ``size`` (``H x W``) images."""
    loader = copy.deepcopy(dict(dataloader_cfg))
    loader['dataset'] = copy.deepcopy(dict(loader['dataset']))
    _rescale_dataset(loader['dataset'], size)
    return loader
