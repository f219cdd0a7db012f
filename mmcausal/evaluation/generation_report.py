"""All generation metrics of one sample set against one reference set, through one feature extractor."""
from typing import Callable, Dict, Optional

import numpy as np
import torch

from .extractors import ImageFeatures, extract_features
from .frechet import frechet_distance_of, spatial_frechet_distance
from .inception_score import inception_score
from .memorisation import memorisation_check
from .precision_recall import precision_recall

MEMORISATION_SPACES = ('pixels', 'features', 'none')


def pixel_vectors(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> float64 (N, H*W*3) in [-1, 1], the generators' scale (memorisation distances)."""
    return torch.from_numpy(images.reshape(len(images), -1)).double() / 127.5 - 1


def conditional_accuracy(probs: torch.Tensor, labels: np.ndarray) -> float:
    """Top-1 accuracy of the extractor's predictions ``probs`` (N, K) against the conditioning ``labels`` (N,)."""
    return float((probs.argmax(dim=1).numpy() == np.asarray(labels)).mean())


def evaluate_generation(samples: np.ndarray, reference: np.ndarray,
                        extractor: Callable[[np.ndarray], ImageFeatures], labels: Optional[np.ndarray] = None,
                        holdout: Optional[np.ndarray] = None, k: int = 3, splits: int = 1,
                        batch_size: int = 100, memorisation_space: str = 'pixels') -> Dict[str, float]:
    """Metrics of ``samples`` against ``reference`` (uint8 (N, H, W, 3) each, of the same H x W).

    Returns ``fd``, ``sfid``, ``inception_score``, ``precision``, ``recall`` (k-NN, ``k``) in the extractor's
    spaces; ``accuracy`` of the extractor against ``labels`` when given and the extractor ``judges_labels``; the
    memorisation check against ``reference`` (leave-one-out within it, or ``holdout`` real images when given):
    ``median_nn_samples``, ``median_nn_reference``, ``nn_ratio``, ``copy_fraction``, in ``memorisation_space``
    ``'pixels'`` ([-1, 1]; the twins' check), ``'features'`` (the extractor's pooled features: cheap for large
    images) or ``'none'`` (skipped).
    """
    if memorisation_space not in MEMORISATION_SPACES:
        raise ValueError(f'memorisation_space must be one of {MEMORISATION_SPACES}, got {memorisation_space!r}')
    fake = extract_features(extractor, samples, batch_size)
    real = extract_features(extractor, reference, batch_size)
    metrics = dict(fd=frechet_distance_of(real.pool, fake.pool), sfid=spatial_frechet_distance(real.spatial,
                                                                                             fake.spatial),
                   inception_score=inception_score(fake.probs, splits), **precision_recall(real.pool, fake.pool, k))
    if labels is not None and getattr(extractor, 'judges_labels', False):
        metrics['accuracy'] = conditional_accuracy(fake.probs, labels)
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
