"""Evaluate one classifier at several input resolutions and RoPE position schemes, without retraining.

What ``tools/analysis_tools/eval_resolutions.py`` is made of (VisionLLaMA paper, Tables 11/12):

* :func:`rescale_pipeline` / :func:`rescale_dataloader_cfg` turn a test pipeline into one whose images are
  exactly ``size x size``: a ``ResizeEdge``/``Resize`` + ``CenterCrop`` pair keeps its resize-to-crop ratio
  (256/224 stays 256/224), a lone square ``Resize`` goes to ``(size, size)``, and a pipeline without any
  resize gets a bicubic ``Resize`` to ``(size, size)`` after image loading.
* :func:`rope_backbone` finds the backbone whose ``rope_mode`` (``'1d' | '2d' | 'as2d'``) can be switched
  at run time (VisionLLaMA); :func:`rope_settings` switches it (and the AS2DRoPE anchor) temporarily.
  Only the RoPE angle tables change, the weights are the same.
* :func:`evaluate_top1` runs every batch once through the data preprocessor and then through the model
  once per RoPE mode (the ``val_step`` path: ``data_preprocessor`` + ``mode='predict'``), counting top-1
  hits; :func:`format_table` prints the result (rows = RoPE modes, columns = sizes).

Note: the paper's Table 12 trains one model per position scheme; here one set of weights (trained with
whatever ``rope_mode`` its config had) is evaluated under all three, so a mode other than the training one
also measures the mismatch of the position scheme, not only its extrapolation.
"""
import copy
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import is_model_wrapper
from torch import Tensor, nn

from mmcausal.models.layers import ROPE_MODES, check_rope_mode

RESIZE_TYPES = ('Resize', 'ResizeEdge')
CROP_TYPES = ('CenterCrop', 'EfficientNetCenterCrop')
LOAD_PREFIX = 'LoadImage'
WRAPPER_KEYS = ('dataset', 'datasets')

Results = Dict[str, Dict[int, float]]  # rope mode -> size -> top-1 (%)


class ResolutionEvalError(ValueError):
    """The model or the pipeline cannot be evaluated at other resolutions (the message says why)."""


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
        raise ResolutionEvalError(f'The test pipeline crops a non-square {tuple(crop_size)}; this tool '
                                  'evaluates square size x size inputs only.')
    return int(height)


def rescale_pipeline(pipeline: Sequence[dict], size: int) -> List[dict]:
    """A copy of the test ``pipeline`` whose output images are ``size x size``.

    * With a ``CenterCrop`` (or ``EfficientNetCenterCrop``): the crop becomes ``size`` and every
      ``Resize``/``ResizeEdge`` before it is scaled by ``size / crop``, i.e. the resize-to-crop ratio is kept.
    * Without a crop: a ``Resize`` with ``keep_ratio=False`` becomes ``scale=(size, size)``; a ``ResizeEdge``
      (or a keep-ratio ``Resize``) becomes a short-edge resize to ``size`` followed by ``CenterCrop(size)``.
    * Without any resize or crop: ``Resize(scale=(size, size), bicubic)`` is inserted after image loading.
    """
    if int(size) <= 0:
        raise ResolutionEvalError(f'Image sizes must be positive, got {size}.')
    size = int(size)
    steps = [copy.deepcopy(dict(t)) for t in pipeline]
    kinds = [_type(t) for t in steps]
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
        keep = {k: old[k] for k in ('backend', 'interpolation') if k in old}
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


def _rescale_dataset(dataset: dict, size: int) -> None:
    inner = [dataset[key] for key in WRAPPER_KEYS if key in dataset]
    if 'pipeline' in dataset or not inner:
        dataset['pipeline'] = rescale_pipeline(dataset.get('pipeline') or [], size)
    for child in inner:
        for item in (child if isinstance(child, (list, tuple)) else [child]):
            _rescale_dataset(item, size)


def rescale_dataloader_cfg(dataloader_cfg: dict, size: int) -> dict:
    """A copy of a dataloader config whose dataset(s) (wrappers included) produce ``size x size`` images."""
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


def _pair(value: Union[int, Sequence[int]]) -> Tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, (int, float)) else (int(value[0]), int(value[1]))


@contextmanager
def rope_settings(backbone: nn.Module, rope_mode: str,
                  anchor: Optional[Union[int, Sequence[int]]] = None) -> Iterator[nn.Module]:
    """Temporarily set ``backbone.rope_mode`` (and the AS2DRoPE ``rope_anchor`` in tokens, if given)."""
    check_rope_mode(rope_mode)
    if rope_mode == '1d' and getattr(backbone, 'window_size', 0):
        raise ResolutionEvalError('rope mode "1d" cannot drive windowed attention (window_size > 0); '
                                  'evaluate this backbone with "2d" / "as2d" only.')
    saved = backbone.rope_mode, backbone.rope_anchor
    backbone.rope_mode = rope_mode
    if anchor is not None:
        backbone.rope_anchor = _pair(anchor)
    try:
        yield backbone
    finally:
        backbone.rope_mode, backbone.rope_anchor = saved


def _check_size(inputs: Tensor, size: Optional[int]) -> None:
    if size is not None and tuple(inputs.shape[-2:]) != (size, size):
        raise ResolutionEvalError(
            f'The rescaled test pipeline produced {tuple(inputs.shape[-2:])} images instead of ({size}, {size}); '
            'it has a resize/crop step this tool does not know. Use ResizeEdge/Resize + CenterCrop in the '
            'test pipeline.')


@torch.no_grad()
def classify_batch(model: nn.Module, batch: dict, rope_mode: str, *,
                   anchor: Optional[Union[int, Sequence[int]]] = None, size: Optional[int] = None) -> Tensor:
    """Class logits ``(B, num_classes)`` of one dataloader batch under ``rope_mode`` (``mode='tensor'``)."""
    model = unwrap(model)
    model.eval()
    data = model.data_preprocessor(batch, False)
    _check_size(data['inputs'], size)
    with rope_settings(rope_backbone(model), rope_mode, anchor):
        return model(data['inputs'], mode='tensor')


@torch.no_grad()
def evaluate_top1(model: nn.Module, dataloader: Iterator[dict], rope_modes: Sequence[str], *,
                  size: Optional[int] = None, anchor: Optional[Union[int, Sequence[int]]] = None,
                  max_batches: Optional[int] = None) -> Tuple[Dict[str, float], int]:
    """Top-1 (%) of ``model`` for every RoPE mode on the same batches; returns ``({mode: top1}, samples)``.

    Each batch is preprocessed once (``val_step`` path) and predicted once per mode (``mode='predict'``).
    ``size`` checks that the inputs are ``size x size``; ``max_batches`` stops early (None = all).
    """
    model = unwrap(model)
    backbone = rope_backbone(model)
    modes = [check_rope_mode(m) for m in rope_modes]
    model.eval()
    hits = dict.fromkeys(modes, 0)
    total = 0
    for index, batch in enumerate(dataloader):
        if max_batches is not None and index >= max_batches:
            break
        data = model.data_preprocessor(batch, False)
        _check_size(data['inputs'], size)
        labels = torch.cat([sample.gt_label.reshape(-1)[:1] for sample in data['data_samples']]).cpu()
        for mode in modes:
            with rope_settings(backbone, mode, anchor):
                samples = model(data['inputs'], data['data_samples'], mode='predict')
            predicted = torch.cat([s.pred_label.reshape(-1)[:1] for s in samples]).cpu()
            hits[mode] += int((predicted == labels).sum())
        total += len(labels)
    if total == 0:
        raise ResolutionEvalError('The dataloader gave no samples to evaluate.')
    return {mode: 100. * hits[mode] / total for mode in modes}, total


def evaluate_resolutions(model: nn.Module, dataloader_cfg: dict, build_dataloader: Callable[[dict], Iterator],
                         sizes: Sequence[int], rope_modes: Sequence[str], *,
                         anchor: Optional[Union[int, Sequence[int]]] = None, max_batches: Optional[int] = None,
                         log: Optional[Callable[[str], None]] = None) -> Tuple[Results, Dict[int, int]]:
    """For every size: rebuild the dataloader with the rescaled pipeline, evaluate every mode.

    Returns ``({mode: {size: top1}}, {size: number of samples})``.
    """
    results: Results = {check_rope_mode(mode): {} for mode in rope_modes}
    counts: Dict[int, int] = {}
    for size in sizes:
        loader = build_dataloader(rescale_dataloader_cfg(dataloader_cfg, size))
        top1, counts[size] = evaluate_top1(model, loader, rope_modes, size=size, anchor=anchor,
                                           max_batches=max_batches)
        del loader
        for mode, value in top1.items():
            results[mode][size] = value
        if log is not None:
            log(f'{size}x{size}: ' + ', '.join(f'{mode} {value:.2f}' for mode, value in top1.items())
                + f' (top-1 %, {counts[size]} images)')
    return results, counts


def format_table(results: Results, sizes: Sequence[int], train_size: Optional[int] = None) -> str:
    """Markdown table of top-1 (%): one row per RoPE mode, one column per size (``*`` = training size)."""
    names = [f'{s}*' if s == train_size else str(s) for s in sizes]
    width = max(7, *(len(n) for n in names))
    header = '| RoPE \\ size | ' + ' | '.join(n.rjust(width) for n in names) + ' |'
    rule = '|' + '-' * 13 + '|' + '|'.join('-' * (width + 1) + ':' for _ in sizes) + '|'
    rows = [f'| {mode:<11} | ' + ' | '.join(f'{values[s]:{width}.2f}' for s in sizes) + ' |'
            for mode, values in results.items()]
    return '\n'.join([header, rule, *rows])
