"""Datasets: generators of the embedded synthetic 'shapes' data (real layouts of ImageNet/ADE20K/COCO), the
per-sample seeded sampler / dataset wrappers, mmpretrain's CIFAR loaders for a copy of the CIFAR files (no
checksums), the image-text datasets of contrastive pre-training (caption tables, folders, webdataset shards), and the
generation recipes' stored latents and ADM centre crop."""
from .cifar import UncheckedCIFAR10, UncheckedCIFAR100
from .image_text import ImageTextDataset, WebDatasetImageText
from .latent_moments import LatentMomentsDataset, LatentMomentsStore, LatentStoreError
from .seeded import SeededDataset, SeededIndex, SeededSampler
from .transforms import ADMCenterCrop, adm_center_crop

__all__ = ['ADMCenterCrop', 'ImageTextDataset', 'LatentMomentsDataset', 'LatentMomentsStore', 'LatentStoreError',
           'SeededDataset', 'SeededIndex', 'SeededSampler', 'UncheckedCIFAR10', 'UncheckedCIFAR100',
           'WebDatasetImageText', 'adm_center_crop']
