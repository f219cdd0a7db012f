"""Writer of the COCO-like instance detection / segmentation dataset."""
import json
import os.path as osp
from typing import List, Tuple

from .cache import generate_cached, save_jpeg, write_text
from .geometry import SHAPE_CLASSES, Polygon, polygon_area
from .styles import SPLITS, get_style, image_rng, style_params


def coco_annotation(ann_id: int, image_id: int, label: int, polygon: Polygon) -> dict:
    """Return the COCO instance annotation of one polygon (``category_id = label + 1``)."""
    x0, y0 = polygon.min(axis=0)
    x1, y1 = polygon.max(axis=0)
    return dict(id=ann_id, image_id=image_id, category_id=label + 1,
                segmentation=[[round(float(v), 2) for v in polygon.reshape(-1)]],
                area=round(polygon_area(polygon), 2),
                bbox=[round(float(v), 2) for v in (x0, y0, x1 - x0, y1 - y0)], iscrowd=0)


def _coco_categories() -> List[dict]:
    """Return the COCO ``categories`` list, ids 1..4 in :data:`SHAPE_CLASSES` order."""
    return [dict(id=i + 1, name=name, supercategory='shape') for i, name in enumerate(SHAPE_CLASSES)]


def _write_coco_split(root: str, split: str, num_images: int, image_size: int, seed: int,
                      style: str = 'v1') -> Tuple[str, int]:
    """Write the images and ``annotations/instances_<split>2017.json``; return its path and #instances."""
    images, annotations = [], []
    for index in range(num_images):
        image_id = index + 1
        file_name = f'{image_id:012d}.jpg'
        image, painted = get_style(style).render_scene(image_rng(seed, 'coco', split, index, style), image_size, 'coco')
        save_jpeg(image, osp.join(root, f'{split}2017', file_name))
        images.append(dict(id=image_id, file_name=file_name, height=image_size, width=image_size))
        for shape in painted:
            annotations.append(coco_annotation(len(annotations) + 1, image_id, shape.label, shape.polygon))
    ann_file = osp.join('annotations', f'instances_{split}2017.json')
    content = dict(info=dict(description='mmcausal synthetic shapes'), licenses=[], images=images,
                   annotations=annotations, categories=_coco_categories())
    write_text(osp.join(root, ann_file), json.dumps(content))
    return ann_file, len(annotations)


def make_coco_like(root: str,
                   *,
                   num_train: int = 64,
                   num_val: int = 16,
                   image_size: int = 128,
                   seed: int = 0,
                   style: str = 'v1') -> dict:
    """Write (or reuse) a COCO-like instance detection/segmentation dataset.

    Layout: ``root/{train,val}2017/<12-digit image id>.jpg`` and
    ``root/annotations/instances_{train,val}2017.json`` with ``images`` (ids from 1), ``annotations``
    (ids from 1; one polygon per instance -- circles are 32-gons --, ``bbox = [x, y, w, h]`` of the
    polygon, ``area`` = polygon area, ``iscrowd = 0``) and ``categories`` (``id = 1 + i`` for
    ``SHAPE_CLASSES[i]``, supercategory ``'shape'``). Each image holds 1-4 non-overlapping instances of
    at least ~16 pixels, rendered from exactly the annotated polygons.
    Use ``mmdet.datasets.CocoDataset(metainfo=dict(classes=SHAPE_CLASSES), ...)``.

    Args:
        root: Output folder.
        num_train: Training images.
        num_val: Validation images.
        image_size: Side of the square images in pixels.
        seed: Random seed; the same seed gives byte-identical files.
        style: ``'v1'`` (default), ``'v2'`` or ``'v3'``, independent draws (see :mod:`.styles`).

    Returns:
        dict: ``root``, ``classes``, ``image_size``, ``num_images``, ``num_instances`` and ``ann_files``
        (relative to ``root``), the last three per split.
    """
    get_style(style)
    params = style_params(dict(dataset='coco', num_train=num_train, num_val=num_val, image_size=image_size,
                                seed=seed), style)
    counts = dict(train=num_train, val=num_val)

    def generate() -> dict:
        written = {split: _write_coco_split(root, split, counts[split], image_size, seed, style) for split in SPLITS}
        return dict(classes=list(SHAPE_CLASSES), image_size=image_size, num_images=counts,
                    num_instances={split: n for split, (_, n) in written.items()},
                    ann_files={split: path for split, (path, _) in written.items()})

    return generate_cached(root, params, ('train2017', 'val2017', 'annotations'), generate)
