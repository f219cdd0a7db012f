"""Datasets: generators of the embedded synthetic 'shapes' data (real layouts of ImageNet/ADE20K/COCO)
and the per-sample seeded sampler / dataset wrappers."""
from .seeded import SeededDataset, SeededIndex, SeededSampler

__all__ = ['SeededDataset', 'SeededIndex', 'SeededSampler']
