"""Evaluate one classifier at several input resolutions and RoPE position schemes, without retraining.

What ``tools/analysis_tools/eval_resolutions.py`` is made of (VisionLLaMA paper, Tables 11/12), with the test
pipelines rescaled to each size by :mod:`mmcausal.analysis.resolution_pipeline`:

* :func:`rope_backbone` finds the backbone whose ``rope_mode`` (``'1d' | '2d' | 'as2d'``) can be switched
  at run time (VisionLLaMA); :func:`rope_settings` switches it (and the AS2DRoPE anchor and scaling,
  ``'isotropic' | 'per_axis'``) temporarily. Only the RoPE angle tables change, the weights are the same.
* :func:`evaluate_top1` runs every batch once through the data preprocessor and then through the model
  once per RoPE scheme (:class:`RopeScheme`: a mode and, for ``as2d``, a scaling; the ``val_step`` path:
  ``data_preprocessor`` + ``mode='predict'``), counting top-1 hits; :func:`evaluate_resolutions` does so at every
  size, and :func:`format_table` prints the result (rows = RoPE schemes, columns = sizes).

The paper's Table 12 trains one model per position scheme; here one set of weights (trained with whatever
``rope_mode`` its config had) is evaluated under all three, so a mode other than the training one also measures the
mismatch of the position scheme, not only its extrapolation.
"""
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from mmengine.model import is_model_wrapper
from mmengine.utils import to_2tuple
from torch import Tensor, nn

from mmcausal.models.layers import ROPE_MODES, RopeConfigError, check_rope_mode
from mmcausal.models.layers.position import check_as2d_scaling
from .resolution_pipeline import ResolutionEvalError, Size, hw, rescale_dataloader_cfg, size_label

Results = Dict[str, Dict[Size, float]]  # rope scheme label -> size -> top-1 (%)


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
