"""Writer of a CIFAR-format copy of the classification data: the python-pickle files of the CIFAR-10 / CIFAR-100
"python version" archives, which mmpretrain's ``CIFAR10`` / ``CIFAR100`` (and torchvision's) read.

Layouts (Krizhevsky's archives, https://www.cs.toronto.edu/~kriz/cifar.html):

* ``'cifar10'``: ``root/cifar-10-batches-py/`` with ``data_batch_1`` .. ``data_batch_5`` (the training images split
  into five batches), ``test_batch`` and ``batches.meta`` (``label_names``, ``num_cases_per_batch``, ``num_vis``);
  a batch is a dict with ``data`` (``uint8`` array ``(N, 3072)``: each row the red, then green, then blue plane of
  a 32 x 32 image, row-major), ``labels``, ``filenames`` and ``batch_label``.
* ``'cifar100'``: ``root/cifar-100-python/`` with ``train``, ``test`` and ``meta``; the batches hold ``fine_labels``
  and ``coarse_labels`` instead of ``labels``, the meta file ``fine_label_names`` and ``coarse_label_names``. The
  shapes have no super-classes: each class is its own coarse class (``coarse_labels == fine_labels``).

Both variants hold the same images: one 32 x 32 shape image per sample, drawn as the ImageNet-like data draws its
images (:func:`~.styles.get_style`'s ``render_classification``) from streams of their own, labels interleaved
(sample ``i`` has label ``i % 4``) so every training batch holds every class equally often.

mmpretrain checks the files against the MD5 sums of the official archives, which a copy cannot match: load it with
``mmcausal.datasets.UncheckedCIFAR10`` / ``UncheckedCIFAR100`` (the same loaders without the checksums).
"""
import os
import os.path as osp
import pickle
from typing import Dict, List

import numpy as np

from .cache import generate_cached
from .geometry import SHAPE_CLASSES
from .styles import get_style, image_rng, style_params

CIFAR_IMAGE_SIZE = 32
#: variant -> (folder, training files, test file, meta file): the names in the official archives.
CIFAR_LAYOUTS = {
    'cifar10': ('cifar-10-batches-py', tuple(f'data_batch_{i}' for i in range(1, 6)), 'test_batch', 'batches.meta'),
    'cifar100': ('cifar-100-python', ('train', ), 'test', 'meta'),
}
#: The generator's split names (the image streams) of CIFAR's ``train`` / ``test``.
_STREAMS = dict(train='train', test='val')
PICKLE_PROTOCOL = 2  # that of the official archives (written by Python 2)


def cifar_folder(variant: str) -> str:
    """The folder of ``variant`` under the dataset root (``cifar-10-batches-py`` / ``cifar-100-python``)."""
    return _layout(variant)[0]


def _layout(variant: str) -> tuple:
    if variant not in CIFAR_LAYOUTS:
        raise ValueError(f'variant must be one of {tuple(CIFAR_LAYOUTS)}, got {variant!r}.')
    return CIFAR_LAYOUTS[variant]


def render_cifar_split(split: str, num_per_class: int, seed: int, style: str = 'v1') -> Dict[str, list]:
    """The samples of one split (``'train'`` or ``'test'``): ``data`` ``(N, 3072)`` uint8 (planar RGB rows),
    ``labels`` and ``filenames``, sample ``i`` of class ``i % len(SHAPE_CLASSES)``."""
    num_classes = len(SHAPE_CLASSES)
    rows, labels, filenames = [], [], []
    for index in range(num_per_class * num_classes):
        label = index % num_classes
        rng = image_rng(seed, 'cifar', _STREAMS[split], index, style)
        image = np.asarray(get_style(style).render_classification(rng, CIFAR_IMAGE_SIZE, label), dtype=np.uint8)
        rows.append(image.transpose(2, 0, 1).reshape(-1))  # HWC -> the R, G, B planes
        labels.append(label)
        filenames.append(f'{SHAPE_CLASSES[label]}_s_{index:06d}.png')
    return dict(data=np.stack(rows), labels=labels, filenames=filenames)


def _dump(path: str, entry: dict) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'wb') as file:
        pickle.dump(entry, file, protocol=PICKLE_PROTOCOL)


def _batches(variant: str, split: str, samples: Dict[str, list]) -> List[tuple]:
    """``(file name, entry)`` of the files holding ``samples`` of ``split`` in ``variant``'s layout."""
    _, train_files, test_file, _ = _layout(variant)
    files = train_files if split == 'train' else (test_file, )
    label_key = 'labels' if variant == 'cifar10' else 'fine_labels'
    out = []
    for number, indices in enumerate(np.array_split(np.arange(len(samples['labels'])), len(files)), start=1):
        labels = [samples['labels'][i] for i in indices]
        entry = dict(batch_label=(f'training batch {number} of {len(files)}' if split == 'train' else
                                  'testing batch 1 of 1'),
                     data=samples['data'][indices], filenames=[samples['filenames'][i] for i in indices])
        entry[label_key] = labels
        if variant == 'cifar100':
            entry['coarse_labels'] = list(labels)
        out.append((files[number - 1], entry))
    return out


def _meta(variant: str, num_train: int) -> dict:
    names = list(SHAPE_CLASSES)
    if variant == 'cifar10':
        files = len(_layout(variant)[1])
        return dict(num_cases_per_batch=-(-num_train // files), label_names=names,
                    num_vis=3 * CIFAR_IMAGE_SIZE**2)
    return dict(fine_label_names=names, coarse_label_names=list(names))


def make_cifar_like(root: str,
                    *,
                    variant: str = 'cifar10',
                    num_train_per_class: int = 250,
                    num_test_per_class: int = 50,
                    seed: int = 0,
                    style: str = 'v1') -> dict:
    """Write (or reuse) a CIFAR-format copy of the shapes classification data (32 x 32 images, module docstring).

    Load it with ``mmcausal.datasets.UncheckedCIFAR10(data_root=root, split='train' | 'test',
    metainfo=dict(classes=SHAPE_CLASSES))`` (``UncheckedCIFAR100`` for ``variant='cifar100'``).

    Args:
        root: Output folder (the files go to its ``cifar-10-batches-py`` / ``cifar-100-python`` folder).
        variant: ``'cifar10'`` or ``'cifar100'`` (the file layout; the images are the same).
        num_train_per_class: Training images per class.
        num_test_per_class: Test images per class.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``, independent draws (see :mod:`.styles`).

    Returns:
        dict: ``root``, ``classes``, ``variant``, ``image_size`` and ``num_images`` (``train`` / ``test``).
    """
    folder, _, _, meta_file = _layout(variant)
    get_style(style)
    if min(num_train_per_class, num_test_per_class) < 1:
        raise ValueError('num_train_per_class and num_test_per_class must be at least 1, got '
                         f'{num_train_per_class} and {num_test_per_class}.')
    params = style_params(dict(dataset=variant, num_train_per_class=num_train_per_class,
                                num_test_per_class=num_test_per_class, seed=seed), style)
    per_class = dict(train=num_train_per_class, test=num_test_per_class)

    def generate() -> dict:
        counts = {}
        for split in ('train', 'test'):
            samples = render_cifar_split(split, per_class[split], seed, style)
            for name, entry in _batches(variant, split, samples):
                _dump(osp.join(root, folder, name), entry)
            counts[split] = len(samples['labels'])
        _dump(osp.join(root, folder, meta_file), _meta(variant, counts['train']))
        return dict(classes=list(SHAPE_CLASSES), variant=variant, image_size=CIFAR_IMAGE_SIZE, num_images=counts)

    return generate_cached(root, params, (folder, ), generate)
