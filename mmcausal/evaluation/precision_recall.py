"""Improved precision and recall (Kynkäänniemi et al., 2019) with k-NN manifolds, k = 3 as the ADM evaluator.

A set's manifold is the union of balls around its points, each with the radius of the distance to that point's k-th
nearest neighbour in the set. Precision = fraction of generated samples inside the real manifold; recall = fraction
of real samples inside the generated manifold.
"""
from typing import Dict

from .distances import DEFAULT_CHUNK, Features, as_features, inside_any_ball, kth_neighbour_distances


def manifold_coverage(queries: Features, points: Features, k: int = 3, chunk: int = DEFAULT_CHUNK) -> float:
    """Fraction of ``queries`` (N, D) inside the k-NN manifold of ``points`` (M, D)."""
    radii = kth_neighbour_distances(points, k, chunk)
    return float(inside_any_ball(queries, points, radii, chunk).double().mean())


def precision_recall(real: Features, fake: Features, k: int = 3, chunk: int = DEFAULT_CHUNK) -> Dict[str, float]:
    """``precision`` and ``recall`` of ``fake`` (N, D) against ``real`` (M, D) features."""
    real, fake = as_features(real), as_features(fake)
    return dict(precision=manifold_coverage(fake, real, k, chunk), recall=manifold_coverage(real, fake, k, chunk))
