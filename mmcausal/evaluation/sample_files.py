"""Sample and reference files in the ADM layout: an ``.npz`` with ``arr_0`` (uint8 N x H x W x 3, RGB) and, when the
images are labelled, ``arr_1`` (N integer labels) -- what ``tools/generation/sample.py`` writes and the ADM evaluator
(``evaluations/evaluator.py`` of openai/guided-diffusion) reads. ADM's reference batches (e.g.
``VIRTUAL_imagenet256_labeled.npz``) also hold the Inception statistics the paper's FID / sFID are measured against:
``mu`` / ``sigma`` (pool_3, 2048-d) and ``mu_s`` / ``sigma_s`` (the spatial ``mixed_6/conv`` features)."""
import os
import os.path as osp
from typing import Dict, Optional, Tuple

import numpy as np
from PIL import Image

from mmcausal.utils.errors import UserInputError

IMAGE_EXTENSIONS = ('.jpeg', '.jpg', '.png', '.bmp', '.webp')


class SampleFileError(UserInputError, ValueError):
    """A sample or reference file is missing or not in the ADM ``.npz`` layout."""


def load_sample_npz(path: str) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """``(images (N, H, W, 3) uint8, labels (N,) int64 or None)`` of the ADM-layout file ``path``."""
    arrays, names = _read_npz(path, ('arr_0', 'arr_1'))
    if 'arr_0' not in arrays:
        raise SampleFileError(f'{path} has no arr_0 (it holds {names or "nothing"}); the ADM layout is '
                              'arr_0 = uint8 images N x H x W x 3 and optionally arr_1 = labels.')
    images = arrays['arr_0']
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3 or len(images) == 0:
        raise SampleFileError(f'{path}: arr_0 must be uint8 images N x H x W x 3 (RGB, N > 0), got '
                              f'{images.dtype} {images.shape}.')
    labels = arrays.get('arr_1')
    if labels is not None and (labels.shape != (len(images), ) or not np.issubdtype(labels.dtype, np.integer)):
        raise SampleFileError(f'{path}: arr_1 must hold one integer label per image ({len(images)}), got '
                              f'{labels.dtype} {labels.shape}.')
    return images, None if labels is None else labels.astype(np.int64)


def _read_npz(path: str, keys: Tuple[str, ...]) -> Tuple[Dict[str, np.ndarray], list]:
    """The arrays ``keys`` that the ``.npz`` file ``path`` holds (only those are read) and the names of all its arrays,
    or a one-line :class:`SampleFileError`."""
    if not osp.isfile(path):
        raise SampleFileError(f'{path} does not exist; give an .npz written by tools/generation/sample.py or '
                              'tools/generation/make_reference_npz.py.')
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in keys if key in data.files}, sorted(data.files)
    except (OSError, ValueError) as error:
        raise SampleFileError(f'{path} is not a readable .npz file ({error}).') from error


def load_reference_statistics(path: str) -> Dict[str, np.ndarray]:
    """``mu`` (D,) / ``sigma`` (D, D), and ``mu_s`` / ``sigma_s`` when present, of an ADM reference file (float64)."""
    arrays, names = _read_npz(path, ('mu', 'sigma', 'mu_s', 'sigma_s'))
    if 'mu' not in arrays or 'sigma' not in arrays:
        raise SampleFileError(f'{path} holds no mu / sigma (it holds {names or "nothing"}); an ADM reference '
                              'batch such as VIRTUAL_imagenet256_labeled.npz stores its Inception statistics there '
                              '(or use --ref-stats images to compute them from arr_0).')
    stats = {}
    for mu, sigma in (('mu', 'sigma'), ('mu_s', 'sigma_s')):
        if mu not in arrays or sigma not in arrays:
            continue
        dims = arrays[mu].shape
        if len(dims) != 1 or arrays[sigma].shape != dims * 2:
            raise SampleFileError(f'{path}: {mu} must be (D,) and {sigma} (D, D), got {dims} and '
                                  f'{arrays[sigma].shape}.')
        stats.update({mu: arrays[mu].astype(np.float64), sigma: arrays[sigma].astype(np.float64)})
    return stats


def save_sample_npz(path: str, images: np.ndarray, labels: Optional[np.ndarray] = None) -> None:
    """Write ``images`` (N, H, W, 3) uint8 and optional ``labels`` (N,) in the ADM layout."""
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    arrays = dict(arr_0=np.ascontiguousarray(images, dtype=np.uint8))
    if labels is not None:
        arrays['arr_1'] = np.asarray(labels, dtype=np.int64)
    np.savez(path, **arrays)


def images_from_class_folders(root: str, size: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray, list]:
    """Read ``root/<class>/<image>`` (sorted class folders = labels 0, 1, ..., as mmpretrain's folder scan), RGB,
    optionally BOX-resized to ``size`` x ``size`` (what the twins' ``Resize(..., backend='pillow',
    interpolation='box')`` does). Returns ``(images (N, H, W, 3) uint8, labels (N,), class names)``."""
    if not osp.isdir(root):
        raise SampleFileError(f'{root} is not a folder of class subfolders.')
    classes = sorted(entry for entry in os.listdir(root) if osp.isdir(osp.join(root, entry)))
    images, labels = [], []
    for label, name in enumerate(classes):
        for filename in sorted(os.listdir(osp.join(root, name))):
            if filename.lower().endswith(IMAGE_EXTENSIONS):
                with Image.open(osp.join(root, name, filename)) as image:
                    image = image.convert('RGB')
                    if size is not None:
                        image = image.resize((size, size), Image.BOX)
                    images.append(np.asarray(image))
                labels.append(label)
    if not images:
        raise SampleFileError(f'{root} holds no images in class subfolders ({", ".join(IMAGE_EXTENSIONS)}).')
    if len({image.shape for image in images}) > 1:
        raise SampleFileError(f'the images under {root} have different sizes; give --size to resize them.')
    return np.stack(images), np.asarray(labels, dtype=np.int64), classes
