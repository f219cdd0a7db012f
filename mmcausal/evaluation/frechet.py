"""Fréchet distance between Gaussians fitted to two feature sets (FID / sFID / the judge's FD).

FD = ||mu1 - mu2||^2 + tr(S1) + tr(S2) - 2 tr((S1^1/2 S2 S1^1/2)^1/2). The trace of the matrix square root is taken
from the eigenvalues of the symmetric PSD matrix S1^1/2 S2 S1^1/2 (float64, negative round-off clipped to 0), so it
is real by construction: no complex ``sqrtm`` output and no ``eps * I`` retry are needed.
"""
from typing import Tuple

import torch
from torch import Tensor

from .distances import Features, as_features


def feature_statistics(features: Features) -> Tuple[Tensor, Tensor]:
    """Mean (D,) and unbiased covariance (D, D) of ``features`` (N, D), N >= 2, in float64."""
    features = as_features(features)
    if features.shape[0] < 2:
        raise ValueError(f'a covariance needs at least 2 feature vectors, got {features.shape[0]}')
    return features.mean(dim=0), torch.cov(features.T).reshape(features.shape[1], features.shape[1])


def _psd_sqrt(matrix: Tensor) -> Tensor:
    """Symmetric square root of a symmetric PSD matrix (eigenvalues below 0 from round-off clipped)."""
    values, vectors = torch.linalg.eigh((matrix + matrix.T) / 2)
    return (vectors * values.clamp(min=0).sqrt()) @ vectors.T


def frechet_distance(mu1: Tensor, sigma1: Tensor, mu2: Tensor, sigma2: Tensor) -> float:
    """Fréchet distance between N(mu1, sigma1) and N(mu2, sigma2) (means (D,), covariances (D, D))."""
    mu1, mu2 = (torch.as_tensor(m, dtype=torch.float64) for m in (mu1, mu2))
    sigma1, sigma2 = (torch.as_tensor(s, dtype=torch.float64) for s in (sigma1, sigma2))
    if mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != (*mu1.shape, *mu1.shape):
        raise ValueError(f'statistics of different dimensions: mu {tuple(mu1.shape)} vs {tuple(mu2.shape)}, '
                         f'sigma {tuple(sigma1.shape)} vs {tuple(sigma2.shape)}')
    root1 = _psd_sqrt(sigma1)
    product = root1 @ sigma2 @ root1
    trace_sqrt = torch.linalg.eigvalsh((product + product.T) / 2).clamp(min=0).sqrt().sum()
    distance = (mu1 - mu2).square().sum() + sigma1.trace() + sigma2.trace() - 2 * trace_sqrt
    return float(distance.clamp(min=0))


def frechet_distance_of(features1: Features, features2: Features) -> float:
    """Fréchet distance between the Gaussians fitted to two (N, D) feature sets."""
    return frechet_distance(*feature_statistics(features1), *feature_statistics(features2))


def spatial_frechet_distance(spatial1: Features, spatial2: Features) -> float:
    """sFID-style Fréchet distance of spatial feature maps (N, C, H, W) (or any (N, ...)), flattened per sample.

    ADM's sFID feeds the first 7 channels of Inception's ``mixed_6/conv`` (7 x 17 x 17); the extractor chooses the
    maps, this function only flattens them.
    """
    spatial1, spatial2 = (torch.as_tensor(s) for s in (spatial1, spatial2))
    return frechet_distance_of(spatial1.reshape(spatial1.shape[0], -1), spatial2.reshape(spatial2.shape[0], -1))
