"""Nearest-neighbour queries on feature sets for the memorisation check, chunked so that memory stays O(chunk x N)
(never N x N).

Features are ``(N, D)`` arrays or tensors; distances are Euclidean, computed in float64 on the CPU.
"""
from typing import Union

import numpy as np
import torch
from torch import Tensor

Features = Union[np.ndarray, Tensor]
DEFAULT_CHUNK = 1024


def as_features(features: Features) -> Tensor:
    """``features`` (N, D) as a float64 CPU tensor; raise ``ValueError`` for another rank or an empty set."""
    tensor = torch.as_tensor(np.asarray(features) if not isinstance(features, Tensor) else features)
    if tensor.ndim != 2 or tensor.shape[0] == 0:
        raise ValueError(f'features must have shape (N, D) with N > 0, got {tuple(tensor.shape)}')
    return tensor.detach().to('cpu', torch.float64)


def _distance_chunks(queries: Tensor, reference: Tensor, chunk: int):
    """Yield ``(start, distances)`` with the (chunk, M) distances of consecutive query rows to ``reference``."""
    for start in range(0, queries.shape[0], chunk):
        yield start, torch.cdist(queries[start:start + chunk], reference)


def nearest_distances(queries: Features, reference: Features, chunk: int = DEFAULT_CHUNK) -> Tensor:
    """(N,) distance from each query to its nearest point of ``reference`` (M, D)."""
    queries, reference = as_features(queries), as_features(reference)
    return torch.cat([d.min(dim=1).values for _, d in _distance_chunks(queries, reference, chunk)])


def kth_neighbour_distances(points: Features, k: int, chunk: int = DEFAULT_CHUNK) -> Tensor:
    """(N,) distance from each point to its ``k``-th nearest *other* point of the same set (the point itself,
    at distance 0, is not counted; duplicates of it are)."""
    points = as_features(points)
    if not 1 <= k < points.shape[0]:
        raise ValueError(f'k must be in [1, {points.shape[0] - 1}] for {points.shape[0]} points, got {k}')
    radii = []
    for start, d in _distance_chunks(points, points, chunk):
        rows = torch.arange(d.shape[0])
        d[rows, rows + start] = float('inf')  # exclude the point itself, not its duplicates
        radii.append(d.topk(k, dim=1, largest=False).values[:, -1])
    return torch.cat(radii)
