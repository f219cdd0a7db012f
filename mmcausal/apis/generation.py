"""Sampling a trained class-conditional generator to files: one PNG per sample and the ADM evaluator's ``.npz``.

The label of sample ``i`` follows the model's ``test_cfg.label_rule`` (:func:`sample_labels`: uniform at random as
the official ``sample_ddp.py``, or balanced ``i mod num_classes``) and its noise is seeded by ``seed + i``
(:class:`~mmcausal.models.generation.ClassConditionalDiffusion`); both are functions of ``seed`` and ``i`` only, so
the files depend neither on the batch size nor on the number of processes: process ``r`` of ``w`` draws the samples
``i = r, r + w, ...``. A PNG is written atomically, and samples whose PNG exists are skipped, so an interrupted run
resumes where it stopped.
"""
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import numpy as np
import torch
from mmpretrain.structures import DataSample
from PIL import Image

from mmcausal.models.generation.class_conditional import LABEL_RULES
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice

NPZ_NAME = 'samples.npz'


def balanced_labels(num_samples: int, num_classes: int) -> np.ndarray:
    """``(N,)`` int64 labels ``i mod num_classes``: every class ``N // num_classes`` or one more times."""
    if num_samples < 1 or num_classes < 1:
        raise UserInputError(f'Need at least one sample and one class, got {num_samples} samples and {num_classes} '
                             'classes.')
    return np.arange(num_samples, dtype=np.int64) % num_classes


def sample_labels(num_samples: int, num_classes: int, rule: str, seed: int = 0) -> np.ndarray:
    """``(N,)`` int64 labels of the samples ``0 .. N-1``.

    ``'random'``: uniform over the classes, as the official DiT / SiT ``sample_ddp.py``
    (``torch.randint(0, num_classes, (n,))``); label ``i`` is the ``i``-th draw of numpy's PCG64 generator seeded by
    ``seed``, a function of ``seed`` and ``i`` only (not of ``N``, the batch size or the number of processes) and a
    stream apart from the torch generators that draw the noise (seeded ``seed + i``). ``'balanced'``:
    :func:`balanced_labels`.
    """
    check_choice('label rule', rule, LABEL_RULES)
    labels = balanced_labels(num_samples, num_classes)  # also checks the counts
    if rule == 'balanced':
        return labels
    return np.random.default_rng(int(seed)).integers(0, num_classes, size=num_samples, dtype=np.int64)


def model_sample_labels(model, num_samples: int) -> np.ndarray:
    """``(N,)`` labels for ``num_samples`` samples of a ``ClassConditionalDiffusion``: :func:`sample_labels` with its
    ``test_cfg`` ``label_rule`` and ``seed`` over its network's classes."""
    return sample_labels(num_samples, model.network.num_classes, model.test_cfg['label_rule'],
                         model.test_cfg['seed'])


def png_path(out_dir: str, index: int) -> Path:
    return Path(out_dir) / f'{index:06d}.png'


def pending_indices(out_dir: str, num_samples: int, rank: int = 0, world_size: int = 1) -> List[int]:
    """This process's sample indices (``rank, rank + world_size, ...``) that have no PNG yet."""
    return [index for index in range(rank, num_samples, world_size) if not png_path(out_dir, index).is_file()]


def write_samples(model, out_dir: str, labels: np.ndarray, indices: Sequence[int], batch_size: int,
                  progress: Optional[Callable[[int], None]] = None) -> None:
    """Sample ``indices`` (with ``labels[index]``) in batches and write each as ``out_dir/<index>.png`` (RGB)."""
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for start in range(0, len(indices), batch_size):
        batch = indices[start:start + batch_size]
        data = [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(int(labels[index])) for index in batch]
        for index, sample in zip(batch, model.predict(None, data)):
            image = Image.fromarray(sample.pred_img.permute(1, 2, 0).cpu().numpy())
            temporary = png_path(out_dir, index).with_suffix('.tmp.png')
            image.save(temporary)
            temporary.replace(png_path(out_dir, index))
        if progress is not None:
            progress(len(batch))


def write_npz(out_dir: str, labels: np.ndarray) -> Path:
    """``out_dir/samples.npz`` with ``arr_0`` (uint8 ``(N, H, W, 3)``, the PNGs in index order) and ``arr_1`` (the
    labels), the layout of the ADM evaluator and DiT's ``sample_ddp.py``."""
    missing = [index for index in range(len(labels)) if not png_path(out_dir, index).is_file()]
    if missing:
        raise UserInputError(f'{len(missing)} of {len(labels)} samples have no PNG in {out_dir} (first: {missing[0]}); '
                             'run the sampling command again to finish them.')
    images = np.stack([np.asarray(Image.open(png_path(out_dir, index)).convert('RGB'))
                       for index in range(len(labels))])
    path = Path(out_dir) / NPZ_NAME
    np.savez(path, images, labels)
    return path


@torch.no_grad()
def sample_to_folder(model, out_dir: str, labels: np.ndarray, batch_size: int = 32, rank: int = 0,
                     world_size: int = 1, progress: Optional[Callable[[int], None]] = None) -> List[int]:
    """Write this process's missing samples of the ``(N,)`` ``labels`` (sample ``i`` of class ``labels[i]``);
    returns the indices it wrote."""
    indices = pending_indices(out_dir, len(labels), rank, world_size)
    write_samples(model.eval(), out_dir, labels, indices, batch_size, progress)
    return indices


__all__ = ['NPZ_NAME', 'balanced_labels', 'model_sample_labels', 'pending_indices', 'png_path', 'sample_labels',
           'sample_to_folder', 'write_npz', 'write_samples']
