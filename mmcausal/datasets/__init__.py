"""Datasets: generators of the embedded synthetic 'shapes' data (real layouts of ImageNet/ADE20K/COCO), the
per-sample seeded sampler / dataset wrappers, and the generation recipes' stored latents and ADM centre crop."""
from .latent_moments import LatentMomentsDataset, LatentMomentsStore, LatentStoreError
from .seeded import SeededDataset, SeededIndex, SeededSampler
from .transforms import ADMCenterCrop, adm_center_crop

__all__ = ['ADMCenterCrop', 'LatentMomentsDataset', 'LatentMomentsStore', 'LatentStoreError', 'SeededDataset',
           'SeededIndex', 'SeededSampler', 'adm_center_crop']
