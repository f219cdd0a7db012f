"""The generation metrics, computed by torch-fidelity on extracted features: Fréchet distance (FID / sFID / the
judge's FD), Inception Score, Kernel Inception Distance and k-NN precision / recall.

torch-fidelity is an optional dependency (``requirements/tests.txt``; ``pip install torch-fidelity``): it is imported
when a metric is computed, so the rest of mmcausal works without it. The settings follow the ADM evaluator, whose
numbers the papers report: IS over 10 consecutive splits (ADM: splits of 5,000 of 50,000 samples, unshuffled), FID
from the reference's statistics, precision / recall with k = 3.
"""
import importlib
from types import ModuleType
from typing import Dict, Mapping

import numpy as np
import torch
from torch import Tensor

from mmcausal.utils.errors import UserInputError

#: ADM's Inception Score: the mean over 10 consecutive splits (of 5,000 of the 50,000 samples)
ADM_IS_SPLITS = 10
#: torch-fidelity's KID default: 100 random subsets of 1,000 features from each set
KID_SUBSET_SIZE = 1000
KID_SUBSETS = 100
TORCH_FIDELITY_REQUIREMENT = 'torch-fidelity==0.4.0'


class MissingMetricsLibrary(UserInputError, ImportError):
    """torch-fidelity, which computes the generation metrics, is not installed."""


def torch_fidelity(submodule: str = '') -> ModuleType:
    """``torch_fidelity`` (or its ``submodule``), or a one-line :class:`MissingMetricsLibrary` naming the install."""
    try:
        return importlib.import_module('torch_fidelity' + (f'.{submodule}' if submodule else ''))
    except ImportError as error:
        raise MissingMetricsLibrary(f'The generation metrics need torch-fidelity: pip install '
                                    f'"{TORCH_FIDELITY_REQUIREMENT}" (or tools/setup_env.sh, which installs '
                                    'requirements/tests.txt).') from error


def _features(features) -> Tensor:
    """``features`` (N, D) as a float64 CPU tensor; ``ValueError`` for another rank or an empty set."""
    tensor = torch.as_tensor(features).detach().cpu()
    if tensor.ndim != 2 or tensor.shape[0] == 0:
        raise ValueError(f'features must have shape (N, D) with N > 0, got {tuple(tensor.shape)}')
    return tensor.double()


def feature_statistics(features) -> Dict[str, np.ndarray]:
    """``mu`` (D,) and unbiased ``sigma`` (D, D) of ``features`` (N, D), N >= 2, in float64 (the keys of an ADM
    reference file)."""
    features = _features(features)
    if features.shape[0] < 2:
        raise ValueError(f'a covariance needs at least 2 feature vectors, got {features.shape[0]}')
    stats = torch_fidelity('metric_fid').fid_features_to_statistics(features)
    return dict(mu=np.asarray(stats['mu'], np.float64), sigma=np.asarray(stats['sigma'], np.float64))


def frechet_distance(stats1: Mapping[str, np.ndarray], stats2: Mapping[str, np.ndarray]) -> float:
    """Fréchet distance between N(``mu``, ``sigma``) of two statistics (e.g. :func:`feature_statistics` and an ADM
    reference file's ``mu`` / ``sigma``)."""
    mu1, mu2 = (np.asarray(s['mu'], np.float64) for s in (stats1, stats2))
    sigma1, sigma2 = (np.asarray(s['sigma'], np.float64) for s in (stats1, stats2))
    if mu1.ndim != 1 or mu1.shape != mu2.shape or sigma1.shape != sigma2.shape or sigma1.shape != (*mu1.shape,) * 2:
        raise ValueError(f'statistics of different dimensions: mu {mu1.shape} vs {mu2.shape}, sigma {sigma1.shape} '
                         f'vs {sigma2.shape}')
    metric = torch_fidelity('metric_fid').fid_statistics_to_metric(dict(mu=mu1, sigma=sigma1),
                                                                    dict(mu=mu2, sigma=sigma2), False)
    return float(metric[torch_fidelity().KEY_METRIC_FID])


def frechet_distance_of(features1, features2) -> float:
    """Fréchet distance between the Gaussians fitted to two (N, D) feature sets."""
    return frechet_distance(feature_statistics(features1), feature_statistics(features2))


def inception_score(logits, splits: int = ADM_IS_SPLITS) -> Dict[str, float]:
    """``inception_score`` (mean) and ``inception_score_std`` over ``splits`` consecutive parts of the class
    ``logits`` (N, K), unshuffled as in ADM (softmax inside)."""
    logits = _features(logits)
    if not 1 <= splits <= logits.shape[0]:
        raise ValueError(f'splits must be in [1, {logits.shape[0]}], got {splits}')
    tf = torch_fidelity()
    score = torch_fidelity('metric_isc').isc_features_to_metric(logits, splits, shuffle=False)
    return dict(inception_score=score[tf.KEY_METRIC_ISC_MEAN], inception_score_std=score[tf.KEY_METRIC_ISC_STD])


def precision_recall(real, fake, k: int = 3) -> Dict[str, float]:
    """Improved ``precision`` (fraction of ``fake`` inside the k-NN manifold of ``real``) and ``recall`` (the
    reverse) of (N, D) feature sets; k = 3 as ADM."""
    real, fake = _features(real).float(), _features(fake).float()
    if not 1 <= k < min(len(real), len(fake)):
        raise ValueError(f'k must be in [1, {min(len(real), len(fake)) - 1}] for {len(real)} real and {len(fake)} '
                         f'generated features, got {k}')
    tf = torch_fidelity()
    # features_1 are the generated ones; save_cpu_ram: distances in row blocks, never N x N at once
    metric = torch_fidelity('metric_prc').prc_features_to_metric(fake, real, prc_neighborhood=k, save_cpu_ram=True,
                                                                 verbose=False)
    return dict(precision=metric[tf.KEY_METRIC_PRECISION], recall=metric[tf.KEY_METRIC_RECALL])


def kernel_distance(real, fake, subset_size: int = KID_SUBSET_SIZE, subsets: int = KID_SUBSETS,
                    seed: int = 2020) -> Dict[str, float]:
    """``kid`` (mean) and ``kid_std`` of the unbiased MMD² with the cubic polynomial kernel over ``subsets`` random
    subsets of ``min(subset_size, N_real, N_fake)`` features of each set (torch-fidelity's KID)."""
    real, fake = _features(real).float(), _features(fake).float()
    tf = torch_fidelity()
    metric = torch_fidelity('metric_kid').kid_features_to_metric(
        fake, real, kid_subset_size=min(subset_size, len(real), len(fake)), kid_subsets=subsets, rng_seed=seed,
        verbose=False)
    return dict(kid=metric[tf.KEY_METRIC_KID_MEAN], kid_std=metric[tf.KEY_METRIC_KID_STD])
