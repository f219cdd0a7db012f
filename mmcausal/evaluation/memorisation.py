"""Memorisation check: are generated samples closer to the training images than fresh real images are?

Each sample's distance to its nearest training image is compared with the same distance for a reference set: real
held-out images when given (the CPU twin's check: median NN-L2 of samples >= 0.8 x that of real val), otherwise the
training images themselves, each to its nearest *other* training image. A generator that copies its training set
has ratio ~0 and a large ``copy_fraction``.
"""
from typing import Dict, Optional

from .distances import DEFAULT_CHUNK, Features, kth_neighbour_distances, nearest_distances


def memorisation_check(samples: Features, train: Features, reference: Optional[Features] = None,
                       copy_threshold: float = 0.1, chunk: int = DEFAULT_CHUNK) -> Dict[str, float]:
    """Nearest-train-neighbour statistics of ``samples`` (N, D) against ``train`` (M, D).

    Returns:
        ``median_nn_samples`` (median distance of a sample to its nearest training image), ``median_nn_reference``
        (the same for ``reference`` (R, D), or leave-one-out within ``train``), ``ratio`` (samples / reference;
        ~1 for a generator that does not copy, ~0 for copies) and ``copy_fraction`` (fraction of samples nearer to
        a training image than ``copy_threshold`` x ``median_nn_reference``).
    """
    sample_nn = nearest_distances(samples, train, chunk)
    reference_nn = (kth_neighbour_distances(train, 1, chunk) if reference is None else
                    nearest_distances(reference, train, chunk))
    median_reference = float(reference_nn.quantile(0.5))
    median_samples = float(sample_nn.quantile(0.5))
    return dict(median_nn_samples=median_samples, median_nn_reference=median_reference,
                ratio=median_samples / median_reference if median_reference > 0 else float('inf'),
                copy_fraction=float((sample_nn < copy_threshold * median_reference).double().mean()))
