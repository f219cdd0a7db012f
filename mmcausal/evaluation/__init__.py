"""Offline evaluation of image generators: FID / sFID (the judge's FD), Inception Score, KID and k-NN precision /
recall computed by torch-fidelity over the features of a registered extractor (the TF-FID Inception-v3 with ADM's
sFID map, or a judge trained by ``tools/train.py``), a memorisation check, and the ADM ``.npz`` files.

torch-fidelity is optional: the names that need it (the extractors) are imported on first use."""
import importlib
from typing import Any

from .distances import kth_neighbour_distances, nearest_distances
from .fidelity import (
    MissingMetricsLibrary,
    feature_statistics,
    frechet_distance,
    frechet_distance_of,
    inception_score,
    kernel_distance,
    precision_recall,
)
from .generation_metric import GenerationMetric
from .generation_report import conditional_accuracy, evaluate_generation, load_reference, pixel_vectors
from .judge_cnn import JudgeCNN
from .memorisation import memorisation_check
from .sample_files import (
    SampleFileError,
    images_from_class_folders,
    load_reference_statistics,
    load_sample_npz,
    save_sample_npz,
)

#: names of :mod:`.extractors`, which imports torch-fidelity
_EXTRACTOR_NAMES = ('ExtractorError', 'ImageFeatures', 'InceptionADM', 'JudgeExtractor', 'build_extractor',
                    'extract_features')


def __getattr__(name: str) -> Any:
    if name in _EXTRACTOR_NAMES:
        return getattr(importlib.import_module('.extractors', __name__), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = [
    'feature_statistics', 'frechet_distance', 'frechet_distance_of', 'inception_score', 'kernel_distance',
    'precision_recall', 'MissingMetricsLibrary', 'memorisation_check', 'nearest_distances', 'kth_neighbour_distances',
    *_EXTRACTOR_NAMES, 'evaluate_generation', 'conditional_accuracy', 'load_reference', 'pixel_vectors',
    'SampleFileError', 'load_sample_npz', 'load_reference_statistics', 'save_sample_npz', 'images_from_class_folders',
    'GenerationMetric', 'JudgeCNN'
]
