"""Tests for the synthetic shapes datasets (:mod:`mmcausal.datasets.shapes`) and their CLI.

Besides the generator's own guarantees (determinism, caching, layouts, annotation consistency), the
datasets are loaded through the stock mmpretrain, mmsegmentation and mmdetection dataset classes.
"""
import json
import os
import os.path as osp
import subprocess
import sys
from typing import Dict

import numpy as np
import pytest
from PIL import Image

from mmcausal.datasets.shapes import (
    ADE20K_CLASSES,
    SHAPE_CLASSES,
    make_ade20k_like,
    make_coco_like,
    make_imagenet_like,
    polygon_mask,
    style_v3,
)
from mmcausal.datasets.shapes.geometry import circumradius
from mmcausal.datasets.shapes.style_v2 import LAYOUTS as V2_LAYOUTS
from zygote import run_python

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CLI = osp.join(REPO_ROOT, 'tools', 'dataset_converters', 'make_shapes_datasets.py')

SMALL = dict(
    imagenet=(make_imagenet_like, dict(num_train_per_class=3, num_val_per_class=2, image_size=32)),
    ade20k=(make_ade20k_like, dict(num_train=6, num_val=3, image_size=48)),
    coco=(make_coco_like, dict(num_train=6, num_val=3, image_size=96)),
)


def read_tree(root: str) -> Dict[str, bytes]:
    """Return ``{relative path: file content}`` of every file under ``root``."""
    tree = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = osp.join(folder, name)
            with open(path, 'rb') as f:
                tree[osp.relpath(path, root)] = f.read()
    return tree


def tree_mtimes(root: str) -> Dict[str, int]:
    """Return ``{relative path: mtime in ns}`` of every file under ``root``."""
    return {
        osp.relpath(osp.join(folder, name), root): os.stat(osp.join(folder, name)).st_mtime_ns
        for folder, _, files in os.walk(root) for name in files
    }


def load_json(path: str) -> dict:
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def coco_polygon(ann: dict) -> np.ndarray:
    """Return the single polygon of a COCO annotation as a ``(K, 2)`` array."""
    assert len(ann['segmentation']) == 1
    return np.asarray(ann['segmentation'][0], dtype=np.float64).reshape(-1, 2)


@pytest.fixture(scope='module')
def imagenet_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('imagenet'))
    make_imagenet_like(root, num_train_per_class=5, num_val_per_class=2, image_size=32)
    return root


@pytest.fixture(scope='module')
def ade20k_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('ade20k'))
    make_ade20k_like(root, num_train=8, num_val=4, image_size=48)
    return root


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('coco'))
    make_coco_like(root, num_train=8, num_val=8)
    return root


# ----------------------------------------------------------------------------------------------------
# Generator guarantees
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(SMALL))
def test_same_seed_gives_identical_bytes(tmp_path, name):
    make, kwargs = SMALL[name]
    make(str(tmp_path / 'a'), seed=3, **kwargs)
    make(str(tmp_path / 'b'), seed=3, **kwargs)
    make(str(tmp_path / 'c'), seed=4, **kwargs)
    a, b, c = (read_tree(str(tmp_path / d)) for d in 'abc')
    assert len(a) > 1 and a == b
    assert sorted(a) == sorted(c)
    images = [p for p in a if p.lower().endswith(('.jpg', '.jpeg'))]
    assert images and all(a[p] != c[p] for p in images)


@pytest.mark.parametrize('name', sorted(SMALL))
def test_second_call_reuses_files(tmp_path, name):
    make, kwargs = SMALL[name]
    first = make(str(tmp_path), **kwargs)
    mtimes = tree_mtimes(str(tmp_path))
    second = make(str(tmp_path), **kwargs)
    assert second == first
    assert tree_mtimes(str(tmp_path)) == mtimes


def test_new_parameters_regenerate_without_stale_files(tmp_path):
    make_imagenet_like(str(tmp_path), num_train_per_class=3, num_val_per_class=2, image_size=32)
    summary = make_imagenet_like(str(tmp_path), num_train_per_class=2, num_val_per_class=1, image_size=32,
                                 layout='folder')
    assert summary['num_images'] == dict(train=8, val=4)
    assert not osp.exists(tmp_path / 'meta')
    assert len(list((tmp_path / 'train').rglob('*.JPEG'))) == 8


def test_refuses_to_overwrite_foreign_data(tmp_path):
    (tmp_path / 'train' / 'n01440764').mkdir(parents=True)
    with pytest.raises(FileExistsError):
        make_imagenet_like(str(tmp_path), num_train_per_class=1, num_val_per_class=1)


def test_imagenet_layouts(tmp_path):
    kwargs = dict(num_train_per_class=2, num_val_per_class=1, image_size=32)
    make_imagenet_like(str(tmp_path / 'folder'), layout='folder', **kwargs)
    make_imagenet_like(str(tmp_path / 'annfile'), layout='annfile', **kwargs)
    both = make_imagenet_like(str(tmp_path / 'both'), layout='both', **kwargs)
    assert both['classes'] == SHAPE_CLASSES == tuple(sorted(SHAPE_CLASSES))
    assert both['num_images'] == dict(train=8, val=4)

    assert sorted(os.listdir(tmp_path / 'folder' / 'train')) == list(SHAPE_CLASSES)
    assert not osp.exists(tmp_path / 'folder' / 'meta')
    assert sorted(os.listdir(tmp_path / 'annfile' / 'val')) == [f'{c}_0.JPEG' for c in SHAPE_CLASSES]

    lines = (tmp_path / 'both' / 'meta' / 'train.txt').read_text().splitlines()
    assert lines[0] == 'circle/circle_0.JPEG 0'
    for line in lines:
        relpath, label = line.split(' ')
        assert relpath.split('/')[0] == SHAPE_CLASSES[int(label)]
        assert (tmp_path / 'both' / 'train' / relpath).is_file()
    with Image.open(tmp_path / 'both' / 'train' / lines[-1].split(' ')[0]) as img:
        assert (img.format, img.mode, img.size) == ('JPEG', 'RGB', (32, 32))


def test_ade20k_layout_and_labels(ade20k_root):
    for folder, prefix, count in (('training', 'ADE_train_', 8), ('validation', 'ADE_val_', 4)):
        images = sorted(os.listdir(osp.join(ade20k_root, 'images', folder)))
        maps = sorted(os.listdir(osp.join(ade20k_root, 'annotations', folder)))
        assert images == [f'{prefix}{i:08d}.jpg' for i in range(1, count + 1)]
        assert maps == [name.replace('.jpg', '.png') for name in images]
        for name in maps:
            with Image.open(osp.join(ade20k_root, 'annotations', folder, name)) as seg:
                assert (seg.mode, seg.size) == ('L', (48, 48))
                labels = np.asarray(seg)
            values = set(np.unique(labels).tolist())
            assert {0, 1} <= values <= set(range(2 + len(SHAPE_CLASSES)))
            assert len(values - {0, 1}) >= 1


def test_ade20k_unlabelled_pixels_separate_shapes_from_background(ade20k_root):
    """Like ADE20K's unlabelled boundaries: no shape pixel touches a background pixel (8-neighbourhood)."""
    seg_dir = osp.join(ade20k_root, 'annotations', 'training')
    for name in sorted(os.listdir(seg_dir)):
        labels = np.asarray(Image.open(osp.join(seg_dir, name)))
        padded = np.pad(labels >= 2, 1)
        touches_shape = np.zeros(labels.shape, dtype=bool)
        for dy in range(3):
            for dx in range(3):
                touches_shape |= padded[dy:dy + labels.shape[0], dx:dx + labels.shape[1]]
        assert (labels == 0).any()
        assert not (touches_shape & (labels == 1)).any()


def test_coco_annotations_match_polygons(coco_root):
    data = load_json(osp.join(coco_root, 'annotations', 'instances_val2017.json'))
    assert [c['name'] for c in data['categories']] == list(SHAPE_CLASSES)
    assert [c['id'] for c in data['categories']] == [1, 2, 3, 4]
    assert {c['supercategory'] for c in data['categories']} == {'shape'}
    assert [img['id'] for img in data['images']] == list(range(1, 9))
    assert [ann['id'] for ann in data['annotations']] == list(range(1, len(data['annotations']) + 1))
    for img in data['images']:
        anns = [a for a in data['annotations'] if a['image_id'] == img['id']]
        assert 1 <= len(anns) <= 4
        assert osp.isfile(osp.join(coco_root, 'val2017', img['file_name']))
        assert img['file_name'] == f'{img["id"]:012d}.jpg' and img['height'] == img['width'] == 128
        masks = [polygon_mask(coco_polygon(a), 128, 128) for a in anns]
        assert np.stack(masks).sum(0).max() == 1, 'instances overlap'
        for ann, mask in zip(anns, masks):
            poly = coco_polygon(ann)
            x0, y0 = poly.min(0)
            x1, y1 = poly.max(0)
            assert ann['bbox'] == pytest.approx([x0, y0, x1 - x0, y1 - y0], abs=0.011)
            assert min(ann['bbox'][2:]) >= 15 and x0 >= 0 and y0 >= 0 and x1 <= 128 and y1 <= 128
            assert ann['area'] == pytest.approx(mask.sum(), rel=0.1)
            assert ann['iscrowd'] == 0 and ann['category_id'] in (1, 2, 3, 4)
            assert len(poly) >= (16 if ann['category_id'] == 1 else 3)


def shape_colour_stats(image: np.ndarray, mask: np.ndarray) -> tuple:
    """Return the mean colour of ``mask`` and of a 3-pixel ring around it."""
    ring = np.zeros_like(mask)
    padded = np.pad(mask, 3)
    for dy in range(7):
        for dx in range(7):
            ring |= padded[dy:dy + mask.shape[0], dx:dx + mask.shape[1]]
    return image[mask].mean(0), image[ring & ~mask].mean(0)


def test_class_is_not_given_by_colour_or_area(tmp_path):
    """Shape pixels have class-independent colour and area, and stand out from their surroundings."""
    root = str(tmp_path)
    make_coco_like(root, num_train=160, num_val=1, image_size=64)
    data = load_json(osp.join(root, 'annotations', 'instances_train2017.json'))
    images = {img['id']: np.asarray(Image.open(osp.join(root, 'train2017', img['file_name'])), float)
              for img in data['images']}
    colours = {c: [] for c in range(1, 5)}
    areas = {c: [] for c in range(1, 5)}
    contrasts = []
    for ann in data['annotations']:
        mask = polygon_mask(coco_polygon(ann), 64, 64)
        inside, ring = shape_colour_stats(images[ann['image_id']], mask)
        colours[ann['category_id']].append(inside)
        areas[ann['category_id']].append(ann['area'])
        contrasts.append(np.linalg.norm(inside - ring))
    assert min(len(v) for v in colours.values()) >= 60
    means = np.stack([np.mean(colours[c], axis=0) for c in colours])
    spread = np.linalg.norm(means[:, None] - means[None], axis=-1).max()
    assert spread < 45, f'per-class mean shape colours differ by {spread:.1f}'
    mean_areas = [np.mean(areas[c]) for c in areas]
    assert max(mean_areas) / min(mean_areas) < 1.3
    assert np.median(contrasts) > 60


def test_cli_writes_datasets_without_importing_torch(tmp_path):
    code = ('import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__"); '
            'assert "torch" not in sys.modules and "mmcausal" not in sys.modules')
    out = tmp_path / 'shapes'
    result = subprocess.run([sys.executable, '-c', code, CLI, '--out', str(out), '--which', 'ade20k', 'coco'],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    lines = result.stdout.splitlines()
    assert [line.split(':')[0] for line in lines] == ['ade20k', 'coco']
    assert 'train 128, val 16' in lines[0]
    assert sorted(os.listdir(out)) == ['ade20k', 'coco']
    assert load_json(str(out / 'coco' / 'shapes_meta.json'))['complete']


# ----------------------------------------------------------------------------------------------------
# Loading through the OpenMMLab dataset classes
# ----------------------------------------------------------------------------------------------------
def samples(dataset) -> list:
    """Return sorted ``(file name, label)`` pairs of an mmpretrain dataset."""
    return sorted((osp.basename(info['img_path']), info['gt_label']) for info in dataset.load_data_list())


def expected_labels(dataset) -> list:
    """Return the labels implied by the file names ``<class>_<i>.JPEG``."""
    return [SHAPE_CLASSES.index(osp.basename(d['img_path']).rsplit('_', 1)[0]) for d in dataset.data_list]


@pytest.mark.parametrize('layout', ['folder', 'annfile'])
def test_mmpretrain_imagenet_loads(tmp_path, layout):
    from mmpretrain.datasets import ImageNet

    make_imagenet_like(str(tmp_path), num_train_per_class=5, num_val_per_class=2, image_size=32, layout=layout)
    for split, count in (('train', 20), ('val', 8)):
        dataset = ImageNet(data_root=str(tmp_path), split=split, metainfo=dict(classes=SHAPE_CLASSES))
        assert bool(dataset.ann_file) == (layout == 'annfile')
        assert len(dataset) == count and dataset.CLASSES == SHAPE_CLASSES
        assert [d['gt_label'] for d in dataset.data_list] == expected_labels(dataset)
        assert dataset[0]['img_path'].endswith('.JPEG')


def test_mmpretrain_folder_scan_agrees_with_ann_file(imagenet_root):
    from mmpretrain.datasets import CustomDataset, ImageNet

    metainfo = dict(classes=SHAPE_CLASSES)
    by_ann_file = ImageNet(data_root=imagenet_root, split='train', metainfo=metainfo)
    by_folders = CustomDataset(data_root=imagenet_root, data_prefix='train', metainfo=metainfo)
    assert by_ann_file.ann_file and not by_folders.ann_file
    assert len(by_ann_file) == 20 and samples(by_ann_file) == samples(by_folders)


def load_seg_sample(dataset, index: int) -> dict:
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets.transforms import LoadAnnotations

    results = LoadImageFromFile()(dataset.get_data_info(index))
    assert results['reduce_zero_label'] is True  # LoadAnnotations takes it from the dataset
    return LoadAnnotations()(results)


def test_mmseg_ade20k_loads(ade20k_root):
    from mmseg.datasets import ADE20KDataset, BaseSegDataset

    stock = ADE20KDataset(data_root=ade20k_root,
                          data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'))
    assert len(stock) == 4
    train = BaseSegDataset(data_root=ade20k_root, img_suffix='.jpg', seg_map_suffix='.png',
                           reduce_zero_label=True, metainfo=dict(classes=ADE20K_CLASSES),
                           data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'))
    assert len(train) == 8 and train.metainfo['classes'] == ADE20K_CLASSES and train.label_map is None
    values = set()
    for index in range(len(train)):
        sample = load_seg_sample(train, index)
        assert sample['img'].shape == (48, 48, 3) and sample['gt_seg_map'].shape == (48, 48)
        values |= set(np.unique(sample['gt_seg_map']).tolist())
    assert {0, 255} <= values <= {0, 1, 2, 3, 4, 255} and len(values) >= 4


def test_mmdet_coco_loads(coco_root):
    from mmdet.datasets import CocoDataset

    for split in ('train', 'val'):
        data = load_json(osp.join(coco_root, 'annotations', f'instances_{split}2017.json'))
        dataset = CocoDataset(data_root=coco_root, ann_file=f'annotations/instances_{split}2017.json',
                              data_prefix=dict(img=f'{split}2017/'), metainfo=dict(classes=SHAPE_CLASSES))
        assert len(dataset) == 8 and dataset.metainfo['classes'] == SHAPE_CLASSES
        instances = [inst for i in range(len(dataset)) for inst in dataset.get_data_info(i)['instances']]
        assert len(instances) == len(data['annotations'])
        assert [inst['bbox_label'] for inst in instances] == [a['category_id'] - 1 for a in data['annotations']]
        assert all(inst['ignore_flag'] == 0 for inst in instances)


def test_pycocotools_mask_matches_rendered_shape(coco_root):
    from pycocotools import mask as mask_utils

    data = load_json(osp.join(coco_root, 'annotations', 'instances_val2017.json'))
    files = {img['id']: img['file_name'] for img in data['images']}
    ious = []
    for ann in data['annotations']:
        image = np.asarray(Image.open(osp.join(coco_root, 'val2017', files[ann['image_id']])), float)
        rle = mask_utils.merge(mask_utils.frPyObjects(ann['segmentation'], 128, 128))
        coco_mask = mask_utils.decode(rle).astype(bool)
        colour = np.median(image[coco_mask], axis=0)
        x, y, w, h = (int(round(v)) for v in ann['bbox'])
        window = np.zeros_like(coco_mask)
        window[max(y - 2, 0):y + h + 2, max(x - 2, 0):x + w + 2] = True
        region = window & (np.linalg.norm(image - colour, axis=-1) < 40)
        ious.append((region & coco_mask).sum() / (region | coco_mask).sum())
    assert len(ious) >= 8 and np.median(ious) > 0.9 and min(ious) > 0.75, ious


# ----------------------------------------------------------------------------------------------------
# Style v2: the independent draw
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('name', sorted(SMALL))
def test_v2_is_deterministic_and_independent_of_v1(tmp_path, name):
    make, kwargs = SMALL[name]
    make(str(tmp_path / 'a'), style='v2', **kwargs)
    make(str(tmp_path / 'b'), style='v2', **kwargs)
    make(str(tmp_path / 'v1'), **kwargs)
    v2_tree, v1_tree = read_tree(str(tmp_path / 'a')), read_tree(str(tmp_path / 'v1'))
    assert v2_tree == read_tree(str(tmp_path / 'b'))
    assert load_json(str(tmp_path / 'a' / 'shapes_meta.json'))['params']['style'] == 'v2'
    images = [p for p in v2_tree if p.lower().endswith(('.jpg', '.jpeg'))]
    assert images and sorted(images) == sorted(p for p in v1_tree if p.lower().endswith(('.jpg', '.jpeg')))
    assert all(v2_tree[p] != v1_tree[p] for p in images)


@pytest.mark.parametrize('layout', sorted(V2_LAYOUTS))
def test_v2_largest_shape_of_every_class_fits(layout):
    """A shape of the largest v2 size keeps its circumscribed disc inside the image, at any rotation."""
    largest = V2_LAYOUTS[layout].size[1]
    for shape in SHAPE_CLASSES:
        assert circumradius(shape, largest**2) < 0.5, (layout, shape)


def test_v2_imagenet_default_size(tmp_path):
    summary = make_imagenet_like(str(tmp_path), num_train_per_class=6, num_val_per_class=1, style='v2')
    assert summary['image_size'] == 64


def test_v2_rejects_unknown_style(tmp_path):
    with pytest.raises(ValueError, match='style'):
        make_coco_like(str(tmp_path), num_train=1, num_val=1, style='v4')


def test_v2_coco_statistics(tmp_path):
    """1-3 separated shapes of about 30-60 px at 128 px, class-independent areas, dark fills that stand out from
    light backgrounds (the opposite polarity of v1)."""
    root = str(tmp_path)
    make_coco_like(root, num_train=120, num_val=1, style='v2')
    data = load_json(osp.join(root, 'annotations', 'instances_train2017.json'))
    images = {img['id']: np.asarray(Image.open(osp.join(root, 'train2017', img['file_name'])), float)
              for img in data['images']}
    per_image = {i: [a for a in data['annotations'] if a['image_id'] == i] for i in images}
    counts = [len(a) for a in per_image.values()]
    assert min(counts) == 1 and max(counts) == 3
    areas = {c: [] for c in range(1, 5)}
    contrasts = []
    for image_id, anns in per_image.items():
        masks = [polygon_mask(coco_polygon(a), 128, 128) for a in anns]
        grown = [_dilate(m, 2) for m in masks]
        assert np.stack(grown).sum(0).max() == 1, 'shapes (with their outlines) touch'
        background = ~np.any([_dilate(m, 3) for m in masks], axis=0)
        assert images[image_id][background].mean() > 150 and all(images[image_id][m].mean() < 110 for m in masks)
        for ann, mask in zip(anns, masks):
            assert 22 <= max(ann['bbox'][2:]) <= 72, ann['bbox']
            areas[ann['category_id']].append(ann['area'])
            inside, ring = shape_colour_stats(images[image_id], mask)
            contrasts.append(np.linalg.norm(inside - ring))
    mean_areas = [np.mean(areas[c]) for c in areas]
    assert min(len(v) for v in areas.values()) >= 30 and max(mean_areas) / min(mean_areas) < 1.3
    assert np.median(contrasts) > 60


def _dilate(mask: np.ndarray, steps: int) -> np.ndarray:
    """Return ``mask`` grown by ``steps`` 8-neighbour steps."""
    for _ in range(steps):
        padded = np.pad(mask, 1)
        mask = np.any([padded[dy:dy + mask.shape[0], dx:dx + mask.shape[1]] for dy in range(3) for dx in range(3)],
                      axis=0)
    return mask


def test_v2_ade20k_labels(tmp_path):
    make_ade20k_like(str(tmp_path), num_train=12, num_val=1, style='v2')
    for index in range(1, 13):
        label = np.asarray(Image.open(tmp_path / 'annotations' / 'training' / f'ADE_train_{index:08d}.png'))
        values = set(np.unique(label).tolist())
        assert {0, 1} <= values <= {0, 1, 2, 3, 4, 5} and 1 <= len(values - {0, 1}) <= 2


def test_cli_style_v2(tmp_path):
    out = tmp_path / 'shapes'
    run_python([sys.executable, CLI, '--out', str(out), '--which', 'coco', '--style', 'v2'],
               cwd=REPO_ROOT).check_returncode()
    assert load_json(str(out / 'coco' / 'shapes_meta.json'))['params']['style'] == 'v2'


# ----------------------------------------------------------------------------------------------------
# Style v3: either polarity, any rotation
# ----------------------------------------------------------------------------------------------------
LUMA = np.array([0.299, 0.587, 0.114])  # ITU-R 601 (Pillow's RGB -> L)


def _band(mask: np.ndarray, inner: int, outer: int) -> np.ndarray:
    """Pixels more than ``inner`` and at most ``outer`` 8-neighbour steps outside ``mask``."""
    from scipy.ndimage import binary_dilation
    square = np.ones((3, 3), bool)
    return binary_dilation(mask, square, outer) & ~binary_dilation(mask, square, inner)


def _v3_classification_samples(count: int):
    """``(luma image, label, polygon)`` of ``count`` v3 classification images (64 px), before JPEG."""
    samples = []
    for index in range(count):
        label = index % len(SHAPE_CLASSES)
        image, (shape, ) = style_v3.render(np.random.default_rng([7, index]), 64, 'imagenet', label)
        samples.append((np.asarray(image, float) @ LUMA, label, shape.polygon))
    return samples


def test_v3_classification_contrast_polarity_and_sizes():
    """Fills differ from the background around them by >= 80 grey levels, light or dark at random for every
    class; circumradii 0.26-0.42 of the image with the same distribution for every class; any rotation."""
    polarity = {label: [] for label in range(len(SHAPE_CLASSES))}
    sizes = {label: [] for label in range(len(SHAPE_CLASSES))}
    triangle_turns = []
    for luma, label, polygon in _v3_classification_samples(160):
        mask = polygon_mask(polygon, 64, 64)
        inside = mask & ~_band(~mask, 0, 1)
        contrast = luma[inside].mean() - luma[_band(mask, 3, 6)].mean()
        assert 70 <= abs(contrast) <= 215, contrast  # 80-200 by design; noise (std 12) and the gradient's slope
        polarity[label].append(contrast > 0)
        radius = np.linalg.norm(polygon - polygon.mean(0), axis=1).max() / 64
        assert 0.259 <= radius <= 0.421, (SHAPE_CLASSES[label], radius)
        sizes[label].append(radius)
        if SHAPE_CLASSES[label] == 'triangle':
            tip = polygon[0] - polygon.mean(0)
            triangle_turns.append(np.degrees(np.arctan2(tip[1], tip[0]) - np.pi / 2) % 120)
    for label in polarity:
        assert 0.25 <= np.mean(polarity[label]) <= 0.75, (SHAPE_CLASSES[label], np.mean(polarity[label]))
    mean_sizes = [np.mean(v) for v in sizes.values()]
    assert max(mean_sizes) / min(mean_sizes) < 1.1
    assert np.histogram(triangle_turns, bins=4, range=(0, 120))[0].min() >= 3  # not only near upright


def test_v3_scene_counts_and_overlap():
    """ADE20K: 1-4 shapes, overlapping in some scenes; COCO: 1-3 shapes kept apart, circumradii 0.12-0.24 of 128
    px."""
    ade = [style_v3.render_scene(np.random.default_rng([8, i]), 64, 'ade20k')[1] for i in range(80)]
    counts = [len(shapes) for shapes in ade]
    assert min(counts) == 1 and max(counts) == 4
    assert any((a.fill & b.fill).any() for shapes in ade for a in shapes for b in shapes if a is not b)
    coco = [style_v3.render_scene(np.random.default_rng([9, i]), 128, 'coco')[1] for i in range(80)]
    assert {len(shapes) for shapes in coco} == {1, 2, 3}
    for shapes in coco:
        grown = [_dilate(s.fill | s.border, 1) for s in shapes]
        assert np.stack(grown).sum(0).max() == 1, 'shapes (with their outlines) touch'
        for shape in shapes:
            radius = np.linalg.norm(shape.polygon - shape.polygon.mean(0), axis=1).max() / 128
            assert 0.119 <= radius <= 0.241, radius


@pytest.mark.parametrize('name', sorted(SMALL))
def test_v3_is_deterministic_and_independent_of_v1_and_v2(tmp_path, name):
    make, kwargs = SMALL[name]
    trees = {}
    for style in ('v3', 'v3_again', 'v2', 'v1'):
        make(str(tmp_path / style), style=style.split('_')[0], **kwargs)
        trees[style] = read_tree(str(tmp_path / style))
    assert trees['v3'] == trees['v3_again']
    assert load_json(str(tmp_path / 'v3' / 'shapes_meta.json'))['params']['style'] == 'v3'
    images = [p for p in trees['v3'] if p.lower().endswith(('.jpg', '.jpeg'))]
    assert images and all(trees['v3'][p] != trees[other][p] for p in images for other in ('v1', 'v2'))


def test_cli_style_v3(tmp_path):
    out = tmp_path / 'shapes'
    run_python([sys.executable, CLI, '--out', str(out), '--which', 'imagenet', '--style', 'v3'],
               cwd=REPO_ROOT).check_returncode()
    assert load_json(str(out / 'imagenet' / 'shapes_meta.json'))['params']['style'] == 'v3'


def test_cli_refuses_an_empty_coco_validation_set_in_one_line(tmp_path):
    result = run_python([sys.executable, CLI, '--out', str(tmp_path), '--which', 'coco', '--coco-val', '0'],
                        cwd=REPO_ROOT)
    assert result.returncode == 2 and result.stderr.strip().splitlines()[-1].endswith('got 0')
    assert not (tmp_path / 'coco').exists()


def test_cli_draws_the_twin_transfer_test_data(tmp_path):
    """``--style v3 --seed 3 --coco-val 48``: the draw of tests/test_twin_transfer.py (conftest's shapes_v3_root)."""
    out = tmp_path / 'shapes'
    run_python([sys.executable, CLI, '--out', str(out), '--which', 'coco', '--style', 'v3', '--seed', '3',
                '--coco-val', '48'], cwd=REPO_ROOT).check_returncode()
    params = load_json(str(out / 'coco' / 'shapes_meta.json'))['params']
    assert (params['style'], params['seed'], params['num_train'], params['num_val']) == ('v3', 3, 64, 48)
    make_coco_like(str(tmp_path / 'fixture'), style='v3', seed=3, num_val=48)  # as the fixture draws it
    assert read_tree(str(out / 'coco')) == read_tree(str(tmp_path / 'fixture'))
