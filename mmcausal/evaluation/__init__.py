"""Offline evaluation of image generators: Fréchet distance (FID / sFID / the judge's FD), Inception Score, k-NN
precision / recall and a memorisation check, over features of any extractor (all maths in float64 on the CPU)."""
from .distances import inside_any_ball, kth_neighbour_distances, nearest_distances
from .frechet import feature_statistics, frechet_distance, frechet_distance_of, spatial_frechet_distance
from .inception_score import inception_score
from .memorisation import memorisation_check
from .precision_recall import manifold_coverage, precision_recall

__all__ = [
    'feature_statistics', 'frechet_distance', 'frechet_distance_of', 'spatial_frechet_distance', 'inception_score',
    'precision_recall', 'manifold_coverage', 'memorisation_check', 'nearest_distances', 'kth_neighbour_distances',
    'inside_any_ball'
]
