"""Offline evaluation of image generators: Fréchet distance (FID / sFID / the judge's FD), Inception Score, k-NN
precision / recall and a memorisation check, over features of any extractor (all maths in float64 on the CPU); the
extractors (a judge trained by ``tools/train.py``, a local Inception-v3 file) and the ADM ``.npz`` files."""
from .distances import inside_any_ball, kth_neighbour_distances, nearest_distances
from .extractors import (
    ExtractorError,
    ImageFeatures,
    InceptionFeatures,
    JudgeFeatures,
    build_extractor,
    extract_features,
)
from .frechet import feature_statistics, frechet_distance, frechet_distance_of, spatial_frechet_distance
from .generation_metric import GenerationMetric
from .generation_report import conditional_accuracy, evaluate_generation, pixel_vectors
from .inception_score import inception_score
from .judge_cnn import JudgeCNN
from .memorisation import memorisation_check
from .precision_recall import manifold_coverage, precision_recall
from .sample_files import SampleFileError, images_from_class_folders, load_sample_npz, save_sample_npz

__all__ = [
    'feature_statistics', 'frechet_distance', 'frechet_distance_of', 'spatial_frechet_distance', 'inception_score',
    'precision_recall', 'manifold_coverage', 'memorisation_check', 'nearest_distances', 'kth_neighbour_distances',
    'inside_any_ball', 'ImageFeatures', 'JudgeFeatures', 'InceptionFeatures', 'ExtractorError', 'build_extractor',
    'extract_features', 'evaluate_generation', 'conditional_accuracy', 'pixel_vectors', 'SampleFileError',
    'load_sample_npz', 'save_sample_npz', 'images_from_class_folders', 'GenerationMetric', 'JudgeCNN'
]
