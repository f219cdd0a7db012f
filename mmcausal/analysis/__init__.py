"""Analysis of trained (or freshly initialised) models, the library of ``tools/analysis_tools``: attention rank
(iLLaMA Fig. 4), attention and gradient maps (De-focus Fig. 1), training schedules and the resolution sweep's plot.

Attention weights are read only through the mixers' probes (:func:`mmcausal.models.layers.record_attention`);
figures are written with matplotlib's Agg canvas.
"""
from .attention_maps import AttentionMap, GradientMap, attention_map, cell_means, gradient_map
from .attention_rank import (
    LayerRank,
    attention_ranks,
    cumulative_singular_values,
    effective_rank,
    index_at,
    numerical_rank,
    singular_values,
)
from .errors import AnalysisError
from .schedules import Schedules, compute_schedules

__all__ = [
    'AttentionMap', 'GradientMap', 'attention_map', 'cell_means', 'gradient_map', 'LayerRank', 'attention_ranks',
    'cumulative_singular_values', 'effective_rank', 'index_at', 'numerical_rank', 'singular_values', 'AnalysisError',
    'Schedules', 'compute_schedules'
]
