"""All generation metrics of one sample set against one reference set, through one feature extractor."""
from typing import Dict, Mapping, Optional, Tuple

import numpy as np
import torch

from .fidelity import (
    ADM_IS_SPLITS,
    KID_SUBSET_SIZE,
    feature_statistics,
    frechet_distance,
    inception_score,
    kernel_distance,
    precision_recall,
)
from .memorisation import memorisation_check
from .sample_files import SampleFileError, load_reference_statistics, load_sample_npz

MEMORISATION_SPACES = ('pixels', 'features', 'none')
#: where the reference's FID / sFID statistics come from: its ``mu`` / ``sigma`` (``npz``), its images, or the
#: former for the Inception extractor when the file has them (``auto``)
REF_STATS = ('auto', 'npz', 'images')


def pixel_vectors(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> float64 (N, H*W*3) in [-1, 1], the generators' scale (memorisation distances)."""
    return torch.from_numpy(images.reshape(len(images), -1)).double() / 127.5 - 1


def conditional_accuracy(logits: torch.Tensor, labels: np.ndarray) -> float:
    """Top-1 accuracy of the extractor's class ``logits`` (N, K) against the conditioning ``labels`` (N,)."""
    return float((logits.argmax(dim=1).numpy() == np.asarray(labels)).mean())


def load_reference(path: str, ref_stats: str = 'auto',
                   inception: bool = True) -> Tuple[np.ndarray, Optional[Dict[str, np.ndarray]]]:
    """The reference images of the ADM file ``path`` and, per ``ref_stats`` (:data:`REF_STATS`), its stored
    statistics (None: compute them from the images). ``inception``: whether the extractor is the Inception network
    the stored statistics were measured with (``auto`` uses them only then)."""
    if ref_stats not in REF_STATS:
        raise ValueError(f'ref_stats must be one of {REF_STATS}, got {ref_stats!r}')
    images, _ = load_sample_npz(path)
    if ref_stats == 'images' or (ref_stats == 'auto' and not inception):
        return images, None
    try:
        return images, load_reference_statistics(path)
    except SampleFileError:
        if ref_stats == 'npz':
            raise
        return images, None


def _fid(fake: torch.Tensor, real: torch.Tensor, reference_stats: Optional[Mapping[str, np.ndarray]],
         mu: str) -> float:
    """FD of the ``fake`` features against ``reference_stats[mu]`` (``mu`` or ``mu_s``, with its ``sigma``) where
    stored, else against the statistics of the ``real`` features."""
    stats, sigma = feature_statistics(fake), mu.replace('mu', 'sigma')
    if reference_stats is not None and mu in reference_stats:
        reference = dict(mu=reference_stats[mu], sigma=reference_stats[sigma])
        if reference['mu'].shape != stats['mu'].shape:
            raise SampleFileError(f'the reference file\'s {mu} is {reference["mu"].shape[0]}-d but the extractor\'s '
                                  f'features are {stats["mu"].shape[0]}-d: stored statistics fit only the network '
                                  'they were measured with (--ref-stats images computes them from the images).')
    else:
        reference = feature_statistics(real)
    return frechet_distance(stats, reference)


def evaluate_generation(samples: np.ndarray, reference: np.ndarray, extractor, labels: Optional[np.ndarray] = None,
                        holdout: Optional[np.ndarray] = None, k: int = 3, splits: int = ADM_IS_SPLITS,
                        batch_size: int = 100, memorisation_space: str = 'pixels',
                        reference_stats: Optional[Mapping[str, np.ndarray]] = None,
                        kid_subset_size: int = KID_SUBSET_SIZE) -> Dict[str, float]:
    """Metrics of ``samples`` against ``reference`` (uint8 (N, H, W, 3) each, of the same H x W) in the spaces of
    ``extractor`` (:func:`~mmcausal.evaluation.build_extractor`), computed by torch-fidelity.

    Returns ``fd`` and ``sfid`` (against ``reference_stats`` ``mu`` / ``sigma`` and ``mu_s`` / ``sigma_s`` where
    given, e.g. ADM's reference batch, else against the reference images' features), ``inception_score`` (and
    ``_std``, over ``splits``), ``kid`` (and ``kid_std``), ``precision``, ``recall`` (k-NN, ``k``); ``accuracy`` of
    the extractor against ``labels`` when given and the extractor ``judges_labels``; the memorisation check against
    ``reference`` (leave-one-out within it, or ``holdout`` real images when given): ``median_nn_samples``,
    ``median_nn_reference``, ``nn_ratio``, ``copy_fraction``, in ``memorisation_space`` ``'pixels'`` ([-1, 1]; the
    twins' check), ``'features'`` (the extractor's pooled features: cheap for large images) or ``'none'`` (skipped).
    """
    from .extractors import extract_features
    if memorisation_space not in MEMORISATION_SPACES:
        raise ValueError(f'memorisation_space must be one of {MEMORISATION_SPACES}, got {memorisation_space!r}')
    fake = extract_features(extractor, samples, batch_size)
    real = extract_features(extractor, reference, batch_size)
    metrics = dict(fd=_fid(fake.pool, real.pool, reference_stats, 'mu'),
                   sfid=_fid(fake.spatial, real.spatial, reference_stats, 'mu_s'),
                   **inception_score(fake.logits, splits), **kernel_distance(real.pool, fake.pool, kid_subset_size),
                   **precision_recall(real.pool, fake.pool, k))
    if labels is not None and getattr(extractor, 'judges_labels', False):
        metrics['accuracy'] = conditional_accuracy(fake.logits, labels)
    if memorisation_space == 'none':
        return metrics
    if memorisation_space == 'pixels':
        vectors = [pixel_vectors(samples), pixel_vectors(reference), None if holdout is None else
                   pixel_vectors(holdout)]
    else:
        vectors = [fake.pool, real.pool, None if holdout is None else extract_features(extractor, holdout,
                                                                                       batch_size).pool]
    memorisation = memorisation_check(*vectors)
    metrics.update(median_nn_samples=memorisation['median_nn_samples'],
                   median_nn_reference=memorisation['median_nn_reference'], nn_ratio=memorisation['ratio'],
                   copy_fraction=memorisation['copy_fraction'])
    return metrics
