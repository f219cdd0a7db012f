"""Rank of attention matrices (iLLaMA paper Sec. 3.7, Fig. 4 and App. E, Fig. 11).

Every attention matrix ``A`` (one image, head and layer: the ``(Nq, Nk)`` weights after masking and normalisation,
read through the mixers' :class:`~mmcausal.models.layers.AttentionProbe` by
:func:`~mmcausal.models.layers.record_attention`) with singular values ``s_1 >= ... >= s_n`` (computed in fp64) gives

* the numerical rank ``torch.linalg.matrix_rank(A, rtol=rtol)``: the number of ``s_i > rtol * s_1``, by default
  ``rtol = max(Nq, Nk) * eps(fp32)`` (torch's default for fp32 matrices: the weights are fp32 numbers, smaller
  singular values are below their resolution);
* the effective rank (Roy & Vetterli 2007) ``exp(H(p))``, ``p_i = s_i / sum_j s_j``, ``H`` the entropy in nats:
  ``N`` for the identity, 1 for a rank-1 matrix;
* the cumulative normalised singular values ``c_k = sum_{i<=k} s_i / sum_j s_j`` (the curves of Fig. 4; a uniform
  spectrum is the diagonal) and the index ``k`` at which ``c_k`` first reaches 0.8, the paper's approximate rank
  (ViT-T 81, iLLaMA-T 129 of N = 197).

Layers are the attention calls in forward order (the blocks of a plain backbone, then e.g. CaiT's class attention);
every statistic is the mean over the images (and over the windows of windowed attention).
"""
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

import numpy as np
import torch
from matplotlib.figure import Figure
from torch import Tensor, nn

from mmcausal.models.layers import record_attention
from .errors import AnalysisError
from .plotting import new_figure, save_figure
from .tokens import no_attention_error, run_model

#: the cumulative level whose index the paper reads as the approximate rank
RANK_LEVEL = .8


def default_rtol(matrices: Tensor) -> float:
    """``max(Nq, Nk) * eps(fp32)`` for ``(..., Nq, Nk)`` matrices."""
    return max(matrices.shape[-2:]) * torch.finfo(torch.float32).eps


def numerical_rank(matrices: Tensor, rtol: Optional[float] = None) -> Tensor:
    """``(...,)`` ranks of ``(..., Nq, Nk)`` matrices (fp64 SVD; ``rtol`` default: :func:`default_rtol`)."""
    return torch.linalg.matrix_rank(matrices.double(), rtol=default_rtol(matrices) if rtol is None else rtol)


def singular_values(matrices: Tensor) -> Tensor:
    """``(..., min(Nq, Nk))`` singular values of ``(..., Nq, Nk)`` matrices in fp64, largest first."""
    return torch.linalg.svdvals(matrices.double())


def effective_rank(values: Tensor) -> Tensor:
    """``(...,)`` Roy-Vetterli effective rank ``exp(-sum p log p)`` of ``(..., n)`` singular values (0 log 0 = 0)."""
    p = values / values.sum(-1, keepdim=True)
    return torch.exp(-torch.xlogy(p, p).sum(-1))


def cumulative_singular_values(values: Tensor) -> Tensor:
    """``(..., n)`` cumulative sums of ``(..., n)`` singular values over their total (ends at 1)."""
    return values.cumsum(-1) / values.sum(-1, keepdim=True)


def index_at(cumulative: Tensor, level: float = RANK_LEVEL) -> Tensor:
    """``(...,)`` 1-based index at which ``cumulative`` first reaches ``level``."""
    return (cumulative < level - 1e-12).sum(-1) + 1


@dataclass
class LayerRank:
    """Rank statistics of one attention layer, each ``(heads,)`` (the curve ``(heads, n)``), averaged over
    ``count`` matrices per head of shape ``rows x cols``."""
    name: str
    rows: int
    cols: int
    count: int
    numerical: Tensor
    effective: Tensor
    index: Tensor
    curve: Tensor

    @property
    def heads(self) -> int:
        return len(self.numerical)


def matrix_statistics(weights: Tensor, rtol: Optional[float] = None, level: float = RANK_LEVEL) -> Dict[str, Tensor]:
    """Per-head sums over the ``M`` matrices of ``(M, heads, Nq, Nk)`` weights: ``numerical``, ``effective``,
    ``index`` (``(heads,)`` each) and ``curve`` (``(heads, n)``)."""
    values = singular_values(weights)
    cumulative = cumulative_singular_values(values)
    return dict(numerical=numerical_rank(weights, rtol).double().sum(0), effective=effective_rank(values).sum(0),
                index=index_at(cumulative, level).double().sum(0), curve=cumulative.sum(0))


@torch.no_grad()
def attention_ranks(model: nn.Module, batches: Iterable[Tensor], rtol: Optional[float] = None,
                    level: float = RANK_LEVEL) -> List[LayerRank]:
    """:class:`LayerRank` of every attention layer of ``model`` over ``(B, C, H, W)`` input ``batches``."""
    sums: Dict[str, dict] = {}
    for inputs in batches:
        with record_attention(model) as records:
            run_model(model, inputs)
        if not records:
            raise no_attention_error(model)
        for name, calls in records.items():
            for call, weights in enumerate(calls):
                key = name if len(calls) == 1 else f'{name}[{call}]'
                entry = sums.setdefault(key, dict(shape=tuple(weights.shape[-2:]), count=0))
                if entry['shape'] != tuple(weights.shape[-2:]):
                    raise AnalysisError(f'{key}: attention matrices of {entry["shape"]} and '
                                        f'{tuple(weights.shape[-2:])}; use images of one size.')
                for stat, value in matrix_statistics(weights, rtol, level).items():
                    entry[stat] = entry.get(stat, 0) + value
                entry['count'] += len(weights)
    return [LayerRank(name, *entry['shape'], entry['count'],
                      *(entry[stat] / entry['count'] for stat in ('numerical', 'effective', 'index', 'curve')))
            for name, entry in sums.items()]


def check_layer_head(ranks: List[LayerRank], layer: int, head: int) -> LayerRank:
    """The :class:`LayerRank` of ``layer`` (negative from the end) after checking that it has ``head``."""
    if not -len(ranks) <= layer < len(ranks):
        raise AnalysisError(f'Layer {layer} is out of range: the model has {len(ranks)} attention layers '
                            f'(0..{len(ranks) - 1}, or -1 for the last).')
    rank = ranks[layer]
    if not 0 <= head < rank.heads:
        raise AnalysisError(f'Head {head} is out of range: {rank.name} has {rank.heads} heads (0..{rank.heads - 1}).')
    return rank


def rank_rows(label: str, ranks: List[LayerRank]) -> List[list]:
    """CSV rows ``model, layer, name, head, matrices, rows, cols, numerical_rank, effective_rank, index_at_0.8``."""
    return [[label, layer, rank.name, head, rank.count, rank.rows, rank.cols, float(rank.numerical[head]),
             float(rank.effective[head]), float(rank.index[head])]
            for layer, rank in enumerate(ranks) for head in range(rank.heads)]


RANK_HEADER = ('model', 'layer', 'name', 'head', 'matrices', 'rows', 'cols', 'numerical_rank', 'effective_rank',
               f'index_at_{RANK_LEVEL}')


def rank_curve_figure(results: Dict[str, List[LayerRank]], layer: int, head: int) -> Figure:
    """Fig. 4: cumulative normalised singular values against the index for one layer and head, one line per model
    (layer and head counted from 1 in the figure)."""
    figure, axes = new_figure(1, 1, (5.2, 4.))
    ax = axes[0, 0]
    for label, ranks in results.items():
        rank = check_layer_head(ranks, layer, head)
        curve = rank.curve[head].numpy()
        index = float(rank.index[head])
        ax.plot(np.arange(1, len(curve) + 1), curve, label=f'{label}: {index:.1f} at {RANK_LEVEL}')
        ax.axvline(index, color=ax.lines[-1].get_color(), linestyle=':', linewidth=1)
    length = max(len(check_layer_head(ranks, layer, head).curve[head]) for ranks in results.values())
    ax.plot([0, length], [0, 1], color='grey', linestyle='--', linewidth=1, label='uniform spectrum')
    ax.axhline(RANK_LEVEL, color='grey', linewidth=.8)
    number = layer % len(next(iter(results.values()))) + 1
    ax.set(xlabel='matrix index k', ylabel='cumulative normalised singular value', xlim=(0, length), ylim=(0, 1.02),
           title=f'Attention spectrum, layer {number}, head {head + 1}\n(dotted: index where it reaches {RANK_LEVEL}; '
                 'lower = lower rank)')
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc='lower right')
    return figure


def plot_rank_curves(results: Dict[str, List[LayerRank]], layer: int, head: int, path: str) -> str:
    """Write :func:`rank_curve_figure` as a PNG; returns ``path``."""
    return save_figure(rank_curve_figure(results, layer, head), path)


def rank_layers_figure(results: Dict[str, List[LayerRank]]) -> Figure:
    """Effective and numerical rank per attention layer (counted from 1): the mean over heads as a line, the range
    over heads (lowest to highest head) as a shaded band of the same colour, one model per colour."""
    figure, axes = new_figure(1, 2, (4.4, 3.6))
    for ax, stat, title in ((axes[0, 0], 'effective', 'effective rank'), (axes[0, 1], 'numerical', 'numerical rank')):
        for label, ranks in results.items():
            values = [getattr(rank, stat) for rank in ranks]
            layers = np.arange(1, len(values) + 1)
            ax.plot(layers, [float(v.mean()) for v in values], marker='o', markersize=3, label=f'{label}: mean')
            ax.fill_between(layers, [float(v.min()) for v in values], [float(v.max()) for v in values],
                            color=ax.lines[-1].get_color(), alpha=.15, label=f'{label}: min-max over heads')
        ax.set(xlabel='attention layer (from 1)', ylabel=title, title=f'{title} per layer')
        ax.set_xticks(np.arange(1, max(len(ranks) for ranks in results.values()) + 1))
    axes[0, 0].legend(fontsize=6)
    figure.suptitle('Rank of the attention matrices, averaged over the images: line = mean over heads, shaded band = '
                    'range from the lowest to the highest head', fontsize=8, wrap=True)
    return figure


def plot_rank_layers(results: Dict[str, List[LayerRank]], path: str) -> str:
    """Write :func:`rank_layers_figure` as a PNG; returns ``path``."""
    return save_figure(rank_layers_figure(results), path)
