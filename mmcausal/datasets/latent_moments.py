"""Stored VAE posterior moments of a dataset (what ``tools/generation/extract_latents.py`` writes) and the training
dataset that reads them.

A store is a folder with ``moments.npy`` ``(N, 2, 2C, h, w)`` float16 (per image: the ``mean | logvar`` of its crop
and of the crop's horizontal flip), ``labels.npy`` ``(N,)`` int64 and ``progress.json`` (``done``: how many leading
images are written, so an interrupted extraction resumes; plus what made it). Training samples a latent from the
moments at every step (:class:`~mmcausal.models.generation.MomentsLatents`), as the official code samples the
posterior of each image, without running the VAE encoder again.
"""
import json
import random
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from mmpretrain.structures import DataSample
from torch.utils.data import Dataset

from mmcausal.registry import DATASETS
from mmcausal.utils.errors import UserInputError

MOMENTS, LABELS, PROGRESS = 'moments.npy', 'labels.npy', 'progress.json'


class LatentStoreError(UserInputError, OSError):
    """A moments store is missing, incomplete or made for other data (the message says what to do)."""


class LatentMomentsStore:
    """Create, resume and fill a store (module doc). ``done`` counts the leading images written."""

    def __init__(self, folder: str, labels: np.ndarray, moment_shape: tuple, info: Optional[dict] = None) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        shape = (len(labels), 2, *moment_shape)
        self.info = dict(info or {}, shape=list(shape))
        if (self.folder / PROGRESS).is_file():
            progress = json.loads((self.folder / PROGRESS).read_text())
            stored = np.load(self.folder / LABELS)
            if progress.get('shape') != list(shape) or not np.array_equal(stored, labels):
                raise LatentStoreError(f'{self.folder} holds moments of other data (shape {progress.get("shape")}); '
                                       'give another output folder or delete this one.')
            self.done = int(progress['done'])
            self.moments = np.load(self.folder / MOMENTS, mmap_mode='r+')
        else:
            np.save(self.folder / LABELS, np.asarray(labels, dtype=np.int64))
            self.moments = np.lib.format.open_memmap(self.folder / MOMENTS, mode='w+', dtype=np.float16, shape=shape)
            self.done = 0
            self._save_progress()

    def append(self, moments: np.ndarray) -> None:
        """Write the next images' moments ``(B, 2, 2C, h, w)`` and record them as done."""
        self.moments[self.done:self.done + len(moments)] = moments.astype(np.float16)
        self.moments.flush()
        self.done += len(moments)
        self._save_progress()

    def _save_progress(self) -> None:
        temporary = self.folder / (PROGRESS + '.tmp')
        temporary.write_text(json.dumps(dict(self.info, done=self.done)))
        temporary.replace(self.folder / PROGRESS)  # atomic: a crash never leaves a torn progress file


@DATASETS.register_module()
class LatentMomentsDataset(Dataset):
    """Items ``dict(inputs=(2C, h, w) float16 moments, data_samples=DataSample(gt_label, sample_idx))`` of a complete
    store; each item takes the flipped image's moments with probability ``flip_prob`` (the official random
    horizontal flip; drawn from ``random``, which the exact-resume loops seed per sample).

    Args:
        data_root: the store's folder.
        flip_prob: probability of the flipped crop (0.5 in DiT / SiT training).
    """

    def __init__(self, data_root: str, flip_prob: float = 0.5) -> None:
        folder = Path(data_root)
        if not (folder / PROGRESS).is_file():
            raise LatentStoreError(f'No latent moments at {data_root!r}: run tools/generation/extract_latents.py '
                                   'first, or set train_dataloader.dataset.data_root to its output folder.')
        progress = json.loads((folder / PROGRESS).read_text())
        if progress['done'] != progress['shape'][0]:
            raise LatentStoreError(f'The latent moments at {data_root!r} are incomplete ({progress["done"]} of '
                                   f'{progress["shape"][0]} images): run tools/generation/extract_latents.py again to '
                                   'finish them.')
        self.moments = np.load(folder / MOMENTS, mmap_mode='r')
        self.labels = np.load(folder / LABELS)
        self.flip_prob = flip_prob
        self.metainfo = dict(progress)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        flip = random.random() < self.flip_prob
        sample = DataSample(metainfo=dict(sample_idx=index, flip=flip)).set_gt_label(int(self.labels[index]))
        return dict(inputs=torch.from_numpy(np.array(self.moments[index, int(flip)])), data_samples=sample)


__all__ = ['LatentMomentsDataset', 'LatentMomentsStore', 'LatentStoreError']
