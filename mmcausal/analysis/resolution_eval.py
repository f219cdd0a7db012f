"""Evaluate one classifier at several input resolutions and RoPE position schemes, without retraining.

What ``tools/analysis_tools/eval_resolutions.py`` is made of (VisionLLaMA paper, Tables 11/12):

* :func:`rescale_pipeline` / :func:`rescale_dataloader_cfg` turn a test pipeline into one whose images are
  exactly ``H x W`` (a size is an int for ``size x size`` or a pair ``(H, W)``). Square sizes: a
  ``ResizeEdge``/``Resize`` + ``CenterCrop`` pair keeps its resize-to-crop ratio (256/224 stays 256/224), a
  lone square ``Resize`` goes to ``(size, size)``, and a pipeline without any resize gets a bicubic ``Resize``
  to ``(size, size)`` after image loading. Non-square sizes never stretch the image: it is resized so that
  its short side covers ``max(H, W)`` (with a crop: the resize-to-crop ratio is kept for that side) and then
  centre-cropped to ``H x W``, as a non-square photo of the same scene would be.
* :func:`rope_backbone` finds the backbone whose ``rope_mode`` (``'1d' | '2d' | 'as2d'``) can be switched
  at run time (VisionLLaMA); :func:`rope_settings` switches it (and the AS2DRoPE anchor and scaling,
  ``'isotropic' | 'per_axis'``) temporarily. Only the RoPE angle tables change, the weights are the same.
* :func:`evaluate_top1` runs every batch once through the data preprocessor and then through the model
  once per RoPE scheme (:class:`RopeScheme`: a mode and, for ``as2d``, a scaling; the ``val_step`` path:
  ``data_preprocessor`` + ``mode='predict'``), counting top-1 hits; :func:`format_table` prints the result
  (rows = RoPE schemes, columns = sizes).

Note: the paper's Table 12 trains one model per position scheme; here one set of weights (trained with
whatever ``rope_mode`` its config had) is evaluated under all three, so a mode other than the training one
also measures the mismatch of the position scheme, not only its extrapolation.
"""
import copy
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import is_model_wrapper
from mmengine.utils import to_2tuple
from torch import Tensor, nn

from mmcausal.models.layers import ROPE_MODES, RopeConfigError, check_rope_mode
from mmcausal.models.layers.grid_rope import check_as2d_scaling

RESIZE_TYPES = ('Resize', 'ResizeEdge')
CROP_TYPES = ('CenterCrop', 'EfficientNetCenterCrop')
LOAD_PREFIX = 'LoadImage'
WRAPPER_KEYS = ('dataset', 'datasets')

Size = Union[int, Tuple[int, int]]  # ``size`` (square) or ``(H, W)``
Results = Dict[str, Dict[Size, float]]  # rope scheme label -> size -> top-1 (%)


class ResolutionEvalError(ValueError):
    """The model or the pipeline cannot be evaluated at other resolutions (the message says why)."""


class RopeScheme(NamedTuple):
    """One row of the table: ``rope_mode`` and, for ``'as2d'``, the ``as2d_scaling`` (None = the backbone's)."""
    label: str
    mode: str
    scaling: Optional[str] = None


def rope_schemes(rope_modes: Sequence[str], as2d_scalings: Sequence[Optional[str]] = (None, )) -> List[RopeScheme]:
    """Rows for ``rope_modes``; ``'as2d'`` gets one row per scaling (``'as2d-<scaling>'`` if more than one)."""
    scalings = [s if s is None else check_as2d_scaling(s) for s in dict.fromkeys(as2d_scalings)] or [None]
    rows = []
    for mode in rope_modes:
        if check_rope_mode(mode) != 'as2d':
            rows.append(RopeScheme(mode, mode))
            continue
        rows += [RopeScheme(mode if len(scalings) == 1 else f'{mode}-{scaling}', mode, scaling)
                 for scaling in scalings]
    return rows


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


# ----------------------------------------------------------------------------------------------------
# Pipelines
# ----------------------------------------------------------------------------------------------------
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


# ----------------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------------
def unwrap(model: nn.Module) -> nn.Module:
    return model.module if is_model_wrapper(model) else model


def rope_backbone(model: nn.Module) -> nn.Module:
    """The backbone of ``model`` with a switchable ``rope_mode``, else :class:`ResolutionEvalError`."""
    model = unwrap(model)
    backbone = getattr(model, 'backbone', None)
    if backbone is None or not hasattr(backbone, 'rope_mode') or not hasattr(backbone, 'rope_anchor'):
        name = type(backbone).__name__ if backbone is not None else f'{type(model).__name__} (no backbone)'
        raise ResolutionEvalError(
            f'This tool needs a VisionLLaMA-style backbone whose RoPE positions can be switched at run time '
            f'(attributes `rope_mode` in {ROPE_MODES} and `rope_anchor`), e.g. type=\'VisionLLaMA\'; '
            f'the config\'s backbone is {name}.')
    return backbone


@contextmanager
def rope_settings(backbone: nn.Module, rope_mode: str, anchor: Optional[Union[int, Sequence[int]]] = None,
                  as2d_scaling: Optional[str] = None) -> Iterator[nn.Module]:
    """Temporarily set ``backbone.rope_mode`` (and the AS2DRoPE ``rope_anchor`` in tokens and
    ``as2d_scaling``, if given)."""
    check_rope_mode(rope_mode)
    if as2d_scaling is not None and not hasattr(backbone, 'as2d_scaling'):
        raise ResolutionEvalError(f'{type(backbone).__name__} has no `as2d_scaling` to switch.')
    saved = backbone.rope_mode, backbone.rope_anchor, getattr(backbone, 'as2d_scaling', None)
    try:
        try:
            backbone.rope_mode = rope_mode
            if anchor is not None:
                backbone.rope_anchor = to_2tuple(anchor)
            if as2d_scaling is not None:
                backbone.as2d_scaling = as2d_scaling
        except RopeConfigError as error:  # e.g. '1d' positions cannot drive windowed attention
            raise ResolutionEvalError(f'{error} Evaluate this backbone with other --rope-modes.') from error
        yield backbone
    finally:
        backbone.rope_mode, backbone.rope_anchor = saved[:2]
        if saved[2] is not None:
            backbone.as2d_scaling = saved[2]


def _check_size(inputs: Tensor, size: Optional[Size]) -> None:
    if size is not None and tuple(inputs.shape[-2:]) != hw(size):
        raise ResolutionEvalError(
            f'The rescaled test pipeline produced {tuple(inputs.shape[-2:])} (H, W) images instead of {hw(size)}; '
            'it has a resize/crop step this tool does not know. Use ResizeEdge/Resize + CenterCrop in the '
            'test pipeline.')


@torch.no_grad()
def classify_batch(model: nn.Module, batch: dict, rope_mode: str, *,
                   anchor: Optional[Union[int, Sequence[int]]] = None, size: Optional[Size] = None,
                   as2d_scaling: Optional[str] = None) -> Tensor:
    """Class logits ``(B, num_classes)`` of one dataloader batch under ``rope_mode`` (``mode='tensor'``)."""
    model = unwrap(model)
    model.eval()
    data = model.data_preprocessor(batch, False)
    _check_size(data['inputs'], size)
    with rope_settings(rope_backbone(model), rope_mode, anchor, as2d_scaling):
        return model(data['inputs'], mode='tensor')


def _schemes(rope_modes: Sequence[Union[str, RopeScheme]]) -> List[RopeScheme]:
    return [m if isinstance(m, RopeScheme) else RopeScheme(check_rope_mode(m), m) for m in rope_modes]


@torch.no_grad()
def evaluate_top1(model: nn.Module, dataloader: Iterator[dict], rope_modes: Sequence[Union[str, RopeScheme]], *,
                  size: Optional[Size] = None, anchor: Optional[Union[int, Sequence[int]]] = None,
                  max_batches: Optional[int] = None) -> Tuple[Dict[str, float], int]:
    """Top-1 (%) of ``model`` for every RoPE scheme (a mode name or a :class:`RopeScheme`) on the same
    batches; returns ``({label: top1}, samples)``.

    Each batch is preprocessed once (``val_step`` path) and predicted once per scheme (``mode='predict'``).
    ``size`` checks that the inputs are ``H x W``; ``max_batches`` stops early (None = all).
    """
    model = unwrap(model)
    backbone = rope_backbone(model)
    schemes = _schemes(rope_modes)
    model.eval()
    hits = {scheme.label: 0 for scheme in schemes}
    total = 0
    for index, batch in enumerate(dataloader):
        if max_batches is not None and index >= max_batches:
            break
        data = model.data_preprocessor(batch, False)
        _check_size(data['inputs'], size)
        labels = torch.cat([sample.gt_label.reshape(-1)[:1] for sample in data['data_samples']]).cpu()
        for scheme in schemes:
            with rope_settings(backbone, scheme.mode, anchor, scheme.scaling):
                samples = model(data['inputs'], data['data_samples'], mode='predict')
            predicted = torch.cat([s.pred_label.reshape(-1)[:1] for s in samples]).cpu()
            hits[scheme.label] += int((predicted == labels).sum())
        total += len(labels)
    if total == 0:
        raise ResolutionEvalError('The dataloader gave no samples to evaluate.')
    return {label: 100. * count / total for label, count in hits.items()}, total


def evaluate_resolutions(model: nn.Module, dataloader_cfg: dict, build_dataloader: Callable[[dict], Iterator],
                         sizes: Sequence[Size], rope_modes: Sequence[Union[str, RopeScheme]], *,
                         anchor: Optional[Union[int, Sequence[int]]] = None, max_batches: Optional[int] = None,
                         log: Optional[Callable[[str], None]] = None) -> Tuple[Results, Dict[Size, int]]:
    """For every size: rebuild the dataloader with the rescaled pipeline, evaluate every scheme.

    Returns ``({label: {size: top1}}, {size: number of samples})``.
    """
    schemes = _schemes(rope_modes)
    results: Results = {scheme.label: {} for scheme in schemes}
    counts: Dict[Size, int] = {}
    for size in sizes:
        loader = build_dataloader(rescale_dataloader_cfg(dataloader_cfg, size))
        top1, counts[size] = evaluate_top1(model, loader, schemes, size=size, anchor=anchor,
                                           max_batches=max_batches)
        del loader
        for label, value in top1.items():
            results[label][size] = value
        if log is not None:
            log('{}x{}: '.format(*hw(size)) + ', '.join(f'{label} {value:.2f}' for label, value in top1.items())
                + f' (top-1 %, {counts[size]} images)')
    return results, counts


def format_table(results: Results, sizes: Sequence[Size], train_size: Optional[Size] = None) -> str:
    """Markdown table of top-1 (%): one row per RoPE scheme, one column per size (``*`` = training size)."""
    train = hw(train_size) if train_size is not None else None
    names = [size_label(s) + ('*' if hw(s) == train else '') for s in sizes]
    width = max(7, *(len(n) for n in names))
    first = max(11, *(len(label) for label in results))
    corner = 'RoPE \\ size'
    header = f'| {corner:<{first}} | ' + ' | '.join(n.rjust(width) for n in names) + ' |'
    rule = '|' + '-' * (first + 2) + '|' + '|'.join('-' * (width + 1) + ':' for _ in sizes) + '|'
    rows = [f'| {label:<{first}} | ' + ' | '.join(f'{values[s]:{width}.2f}' for s in sizes) + ' |'
            for label, values in results.items()]
    return '\n'.join([header, rule, *rows])
