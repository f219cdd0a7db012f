"""Writer of the ADE20K-like semantic segmentation dataset."""
import os.path as osp
from typing import List, Tuple

import numpy as np
from PIL import Image

from .cache import generate_cached, save_jpeg, save_label_png
from .drawing import PaintedShape
from .geometry import SHAPE_CLASSES
from .styles import SPLITS, get_style, image_rng, style_params

#: Semantic classes of the ADE20K-like dataset after ``reduce_zero_label`` (label 1 -> 0, ...).
ADE20K_CLASSES: Tuple[str, ...] = ('background', ) + SHAPE_CLASSES
ADE_UNLABELLED = 0
ADE_BACKGROUND = 1
ADE_FIRST_SHAPE = 2


def label_map(painted: List[PaintedShape], image_size: int) -> np.ndarray:
    """Return the ``(image_size, image_size)`` uint8 ADE20K label map of a scene: later shapes over earlier
    ones, each shape's border unlabelled (0), the rest background (1)."""
    labels = np.full((image_size, image_size), ADE_BACKGROUND, dtype=np.uint8)
    for shape in painted:
        labels[shape.border] = ADE_UNLABELLED
        labels[shape.fill] = ADE_FIRST_SHAPE + shape.label
    return labels


def render_segmentation_sample(rng: np.random.Generator, image_size: int,
                               style: str = 'v1') -> Tuple[Image.Image, np.ndarray]:
    """Render a segmentation scene of ``style`` and its ADE20K label map."""
    image, painted = get_style(style).render_scene(rng, image_size, 'ade20k')
    return image, label_map(painted, image_size)


def _write_ade20k_split(root: str, split: str, num_images: int, image_size: int, seed: int,
                        style: str = 'v1') -> int:
    """Write the images and label maps of one split; return the number of images."""
    folder = dict(train='training', val='validation')[split]
    for index in range(num_images):
        stem = f'ADE_{split}_{index + 1:08d}'
        image, labels = render_segmentation_sample(image_rng(seed, 'ade20k', split, index, style), image_size, style)
        save_jpeg(image, osp.join(root, 'images', folder, f'{stem}.jpg'))
        save_label_png(labels, osp.join(root, 'annotations', folder, f'{stem}.png'))
    return num_images


def make_ade20k_like(root: str,
                     *,
                     num_train: int = 128,
                     num_val: int = 16,
                     image_size: int = 64,
                     seed: int = 0,
                     style: str = 'v1') -> dict:
    """Write (or reuse) an ADE20K-like semantic segmentation dataset.

    Layout: ``root/images/{training,validation}/ADE_{train,val}_<8 digits>.jpg`` and label maps
    ``root/annotations/{training,validation}/<same stem>.png`` (single-channel uint8). Raw labels follow
    ADE20K: 0 = unlabelled (a 1-pixel outline around each shape), 1 = background, ``2 + i`` =
    ``SHAPE_CLASSES[i]``. With ``reduce_zero_label=True`` (ADE20K's setting) the classes are
    :data:`ADE20K_CLASSES` and unlabelled pixels become 255 (ignored).

    Note: mmseg's ``ADE20KDataset`` rejects ``metainfo`` classes that are not among its 150 ADE classes;
    load custom class names with ``BaseSegDataset(img_suffix='.jpg', seg_map_suffix='.png',
    reduce_zero_label=True, metainfo=dict(classes=ADE20K_CLASSES))`` or a subclass overriding ``METAINFO``.

    Args:
        root: Output folder.
        num_train: Training images.
        num_val: Validation images.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``, independent draws (see :mod:`.styles`).

    Returns:
        dict: ``root``, ``classes`` (after ``reduce_zero_label``), ``image_size`` and ``num_images``.
    """
    get_style(style)
    params = style_params(dict(dataset='ade20k', num_train=num_train, num_val=num_val, image_size=image_size,
                                seed=seed), style)
    counts = dict(train=num_train, val=num_val)

    def generate() -> dict:
        for split in SPLITS:
            _write_ade20k_split(root, split, counts[split], image_size, seed, style)
        return dict(classes=list(ADE20K_CLASSES), image_size=image_size, num_images=counts)

    return generate_cached(root, params, ('images', 'annotations'), generate)


