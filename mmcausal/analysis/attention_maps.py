"""Attention and gradient maps of one image at one layer (De-focus paper Fig. 1 and App. B.1).

Attention map
    The weights of one query token over the image's key tokens at the chosen layer, per head and their mean over
    heads, read through the mixer's :class:`~mmcausal.models.layers.AttentionProbe` with
    :func:`~mmcausal.models.layers.record_attention`; the weight on the class-token key is reported apart. With it
    comes the layer's attention matrix between the image tokens (rows: queries, columns: keys, both in raster
    order; mean over heads, diagonal set to 0 and divided by the maximum as in App. B.1), Fig. 1(a)'s picture. The
    paper approximates that matrix with gradients because Mamba has none; here the attention models show their
    real weights, and a model without attention weights (De-focus Mamba, RetNet) is refused.
Gradient map
    ``|d y / d x|`` summed over the colour channels of the preprocessed input pixels ``x``, where ``y`` is the L2
    norm of one output token (the class token or a patch token) at the output of the chosen layer: the paper's
    receptive field (App. B.1, the class token's norm back-propagated through its layer) taken down to the pixels.
    Its cell view (:func:`cell_means`) averages it over the pixels of every token. A strictly causal model gives
    exactly 0 on the pixels of every patch after the output token in the sequence.
"""
import math
import textwrap
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import Tensor, nn

from mmcausal.models.layers import TokenLayout, record_attention
from .errors import AnalysisError
from .plotting import fraction_colorbar, new_figure, overlay, save_figure
from .tokens import (
    Token,
    cls_slot,
    image_grid,
    layer_block,
    no_attention_error,
    patch_slots,
    record_block,
    run_model,
    token_slot,
)

MAP_KINDS = ('attention', 'gradient')


@dataclass
class AttentionMap:
    """What one query attends to at one layer.

    Attributes:
        heads: ``(heads, h, w)`` weights of the query on the image's key cells (the key grid: the image's token
            grid, or the reduced grid of sub-sampled attention).
        cls: ``(heads,)`` weight on the class-token key, None without one.
        matrix: ``(image tokens, key cells)`` mean over heads, raster order, diagonal 0, divided by its maximum.
        query_cell: ``(row, col)`` of a patch query, None for the class token.
    """
    heads: Tensor
    cls: Optional[Tensor]
    matrix: Tensor
    query_cell: Optional[Tuple[int, int]]


def key_cells(mixer: nn.Module, layout: TokenLayout, num_tokens: int, num_keys: int) -> Tuple[Tensor, Tuple[int, int]]:
    """``(key slot of every key cell in raster order, key grid (h, w))`` of a layer's attention: the sequence's patch
    slots, or the whole reduced grid of a sub-sampled attention (``sr_ratio``)."""
    if num_keys == num_tokens:
        return patch_slots(layout, num_tokens), image_grid(layout)
    ratio = getattr(mixer, 'sr_ratio', 1)
    grid = tuple(math.ceil(side / ratio) for side in layout.grid)
    if ratio > 1 and num_keys == grid[0] * grid[1]:
        return torch.arange(num_keys), grid
    raise AnalysisError(f'The attention of this layer ({type(mixer).__name__}) has {num_keys} keys for {num_tokens} '
                        'tokens; this tool cannot place them on the image.')


@torch.no_grad()
def attention_map(model: nn.Module, image: Tensor, layer: int, query: Token) -> AttentionMap:
    """The :class:`AttentionMap` of ``query`` (``'cls'`` or a patch index) at ``layer`` for a ``(1, C, H, W)``
    input."""
    _, block = layer_block(model, layer)
    probe = getattr(getattr(block, 'attn', None), 'attn_probe', None)
    if probe is None:
        raise no_attention_error(model, ' Ask for gradient maps only (--maps gradient).')
    name = next(name for name, module in model.named_modules() if module is probe)
    with record_block(block) as calls, record_attention(model) as records:
        run_model(model, image)
    weights, call = records[name][0], calls[0]
    num_tokens = call.output.shape[1]
    if weights.shape[0] != image.shape[0] or weights.shape[-2] != num_tokens:
        raise AnalysisError(f'Layer {layer} attends inside windows ({type(block.attn).__name__}: {weights.shape[0]} '
                            f'matrices of {weights.shape[-2]} queries for {image.shape[0]} image); choose a layer with '
                            'global attention.')
    weights = weights[0].float()
    slot = token_slot(call.layout, num_tokens, query)
    keys, grid = key_cells(block.attn, call.layout, num_tokens, weights.shape[-1])
    key_cls = cls_slot(call.layout, num_tokens) if weights.shape[-1] == num_tokens else None
    matrix = weights.mean(0)[patch_slots(call.layout, num_tokens)][:, keys]
    if matrix.shape[0] == matrix.shape[1]:
        matrix.fill_diagonal_(0)
    query_cell = None if query == 'cls' else divmod(int(query), image_grid(call.layout)[1])
    return AttentionMap(weights[:, slot, keys].view(-1, *grid), None if key_cls is None else weights[:, slot, key_cls],
                        matrix / matrix.max().clamp(min=1e-12), query_cell)


@dataclass
class GradientMap:
    """``pixels``: ``(B, H, W)`` channel-summed ``|d y / d x|``; ``grid``: the layer's image token grid ``(h, w)``."""
    pixels: Tensor
    grid: Tuple[int, int]


def gradient_map(model: nn.Module, images: Tensor, layer: int, output: Token) -> GradientMap:
    """The :class:`GradientMap` of the L2 norm of ``output`` (``'cls'`` or a patch index) at the output of ``layer``
    for ``(B, C, H, W)`` inputs (each image's map is its own: the norms are summed over the batch)."""
    _, block = layer_block(model, layer)
    images = images.detach().requires_grad_(True)
    with torch.enable_grad(), record_block(block) as calls:
        run_model(model, images)
        tokens = calls[0].output
        target = tokens[:, token_slot(calls[0].layout, tokens.shape[1], output)].norm(dim=-1).sum()
        (gradient, ) = torch.autograd.grad(target, images)
    return GradientMap(gradient.abs().sum(1), image_grid(calls[0].layout))


def cell_means(pixels: Tensor, grid: Tuple[int, int]) -> Tensor:
    """``(B, H, W)`` pixel map -> ``(B, h, w)`` means over the pixels of every token cell (adaptive pooling)."""
    return F.adaptive_avg_pool2d(pixels[:, None], grid)[:, 0]


@dataclass
class MapRow:
    """One model's row of the figure: its label, the picture ``(H, W, 3)``, the block index (from 0) and the number
    of blocks, and the maps it was asked for."""
    label: str
    picture: np.ndarray
    layer: int
    num_layers: int
    attention: Optional[AttentionMap] = None
    gradient: Optional[GradientMap] = None

    @property
    def layer_name(self) -> str:
        """The layer counted from 1, as the README and the papers count: ``layer 3 of 4``."""
        return f'layer {self.layer + 1} of {self.num_layers}'


def map_rows_csv(row: MapRow) -> List[list]:
    """CSV rows ``model, layer, map, head, row, col, value``: the query's attention per head and mean (key cells)
    and the gradient's cell means (token cells)."""
    rows = []
    if row.attention is not None:
        heads = row.attention.heads
        for head, values in [*enumerate(heads), ('mean', heads.mean(0))]:
            rows += [[row.label, row.layer, 'attention', head, r, c, float(values[r, c])]
                     for r in range(values.shape[0]) for c in range(values.shape[1])]
    if row.gradient is not None:
        cells = cell_means(row.gradient.pixels, row.gradient.grid)[0]
        rows += [[row.label, row.layer, 'gradient', '', r, c, float(cells[r, c])]
                 for r in range(cells.shape[0]) for c in range(cells.shape[1])]
    return rows


MAP_HEADER = ('model', 'layer', 'map', 'head', 'row', 'col', 'value')


def maps_figure(rows: List[MapRow], query: Token, output: Token) -> Figure:
    """One row per model: the image, the query's attention (mean, then per head), the attention matrix and the
    gradient map (its token view, :func:`cell_means`), each divided by its maximum, with colour bars, ticks (pixels;
    tokens for the matrix) and a title that says what is drawn."""
    columns = [1 + (0 if row.attention is None else row.attention.heads.shape[0] + 2) + (row.gradient is not None)
               for row in rows]
    figure, axes = new_figure(len(rows), max(columns), (2.5, 2.5))
    for ax_row, row in zip(axes, rows):
        overlay(ax_row[0], row.picture, None, '\n'.join(textwrap.wrap(f'{row.label}, {row.layer_name}', 30)))
        panels = iter(ax_row[1:])
        if row.attention is not None:
            attention = row.attention
            cls = '' if attention.cls is None else f', cls key {float(attention.cls.mean()):.2f}'
            overlay(next(panels), row.picture, attention.heads.mean(0), f'query {query}: mean of heads{cls}',
                    mark=attention.query_cell)
            for head, values in enumerate(attention.heads):
                overlay(next(panels), row.picture, values, f'query {query}: head {head + 1}', mark=attention.query_cell)
            ax = next(panels)
            ax.imshow(attention.matrix.numpy(), cmap='viridis', vmin=0, vmax=1, interpolation='nearest')
            ax.set_xlabel('key token', fontsize=6)
            ax.set_ylabel('query token', fontsize=6)
            ax.tick_params(labelsize=6, length=2)
            fraction_colorbar(ax, 'viridis')
            ax.set_title('attention matrix (mean of heads)', fontsize=8)
        if row.gradient is not None:
            overlay(next(panels), row.picture, cell_means(row.gradient.pixels, row.gradient.grid)[0],
                    f'|d {output} / d pixels| per token')
        for ax in panels:
            ax.set_axis_off()
    drawn = ([f'where the {describe(query)} attends (white square: the query token)']
             if any(row.attention is not None for row in rows) else [])
    if any(row.gradient is not None for row in rows):
        drawn.append(f'which pixels the {describe(output)} depends on')
    what = ' and '.join(drawn)
    figure.suptitle(f'{what[:1].upper()}{what[1:]}, at the layer each row names (layers counted from 1). Each map is '
                    'divided by its own maximum; image tokens in raster order.', fontsize=8, wrap=True)
    return figure


def describe(token: Token) -> str:
    """``'class token'`` or ``'patch token 27'``."""
    return 'class token' if token == 'cls' else f'patch token {token}'


def plot_maps(rows: List[MapRow], query: Token, output: Token, path: str) -> str:
    """Write :func:`maps_figure` as a PNG; returns ``path``."""
    return save_figure(maps_figure(rows, query, output), path)
