"""Fail early, with the paths and the fix, when a config's dataset is not on disk or is unusable.

The dataset classes of mmpretrain/mmseg/mmdet only notice a missing dataset deep inside their
constructors (``os.scandir``/``open`` tracebacks from the Runner's dataloader build), and some bad datasets
not at all (an empty one "trains" without a single step; class names missing from a COCO file silently
shift the labels). ``tools/train.py`` and ``tools/test.py`` call, before building the Runner,
:func:`check_dataset_paths` (paths exist) and :func:`check_dataset_files` (cheap content checks: JSON
annotation files complete, classification labels in range, every segmentation image has a readable map of its
size, read from the file headers), and after building it :func:`check_built_datasets` (no empty dataset, every
COCO class name known). What the libraries raise later, while the data loads (an empty dataset, a sample file that
cannot be read), :mod:`mmcausal.utils.user_errors` recognises as these errors.
"""
import importlib
import json
import os
import os.path as osp
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from mmengine.config import Config
from PIL import Image

from .errors import UserInputError

WRAPPER_KEYS = ('dataset', 'datasets')
EXIF_ORIENTATION = 0x0112
TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)  # the EXIF orientations that swap width and height


class DatasetNotFoundError(UserInputError, FileNotFoundError):
    """A dataset path named by the config does not exist."""


class DatasetFormatError(UserInputError, ValueError):
    """A dataset is on disk but unusable: corrupt or mismatched annotations, no samples, unknown classes."""


def _leaf_datasets(dataset_cfg: dict) -> Iterator[dict]:
    """Yield the real datasets inside wrappers such as ``RepeatDataset`` or ``ConcatDataset``."""
    inner = [dataset_cfg[key] for key in WRAPPER_KEYS if key in dataset_cfg]
    if not inner:
        yield dataset_cfg
        return
    for child in inner:
        for item in (child if isinstance(child, (list, tuple)) else [child]):
            yield from _leaf_datasets(item)


def _expected_paths(dataset_cfg: dict) -> List[str]:
    """Files/folders a dataset config reads: ``data_root``, ``ann_file``, ``data_prefix`` (or ``split``)."""
    root = dataset_cfg.get('data_root') or ''
    paths = [root] if root else []
    if dataset_cfg.get('ann_file'):
        paths.append(osp.join(root, dataset_cfg['ann_file']))
    prefix = dataset_cfg.get('data_prefix')
    if isinstance(prefix, str):
        prefix = dict(img=prefix)
    if prefix:
        paths += [osp.join(root, value) for value in prefix.values() if isinstance(value, str) and value]
    elif dataset_cfg.get('split') and str(dataset_cfg.get('type', '')).startswith('ImageNet'):
        # mmpretrain ImageNet: <data_root>/<split>; a CIFAR split names batches, not a folder
        paths.append(osp.join(root, dataset_cfg['split']))
    return paths


def check_dataset_paths(cfg: Config, dataloaders: Sequence[str]) -> None:
    """Raise :class:`DatasetNotFoundError` if a path of ``cfg[<dataloader>].dataset`` is missing.

    Only local paths are checked (anything with ``://`` is left to its backend).
    """
    for name in dataloaders:
        loader = cfg.get(name)
        if not loader or 'dataset' not in loader:
            continue
        for dataset in _leaf_datasets(loader['dataset']):
            missing = [p for p in _expected_paths(dataset) if '://' not in p and not osp.exists(p)]
            if missing:
                raise DatasetNotFoundError(
                    f'{name}: dataset {dataset.get("type", "?")} expects {missing[0]!r}, which does not '
                    f'exist. Put the dataset there (docs/training.md), or point the config '
                    f'elsewhere with --cfg-options {name}.dataset.data_root=PATH. For a quick try, the '
                    'embedded synthetic data: python tools/dataset_converters/make_shapes_datasets.py')


def _dataset_class(dataset_cfg: dict, registry_module: str) -> Optional[type]:
    """The class ``dataset_cfg['type']`` names in ``<registry_module>.DATASETS``, or ``None``."""
    dataset_type = dataset_cfg.get('type')
    if isinstance(dataset_type, type):
        return dataset_type
    if not isinstance(dataset_type, str):
        return None
    return importlib.import_module(registry_module).DATASETS.get(dataset_type)


def _check_json_complete(name: str, path: str) -> None:
    """A JSON file that is empty or cut off (the usual corruption: an interrupted copy or download) fails
    here, without parsing it (COCO's train file is 450 MB); other syntax errors surface when it is loaded."""
    with open(path, 'rb') as file:
        size = file.seek(0, os.SEEK_END)
        head = tail = b''
        if size:
            file.seek(0)
            head = file.read(64).lstrip(b'\xef\xbb\xbf \t\r\n')[:1]  # a BOM is the JSON loader's to report
            file.seek(max(0, size - 64))
            tail = file.read().rstrip()[-1:]
    if (head, tail) not in ((b'{', b'}'), (b'[', b']')):
        state = 'is empty' if not size else 'is truncated or not JSON'
        raise DatasetFormatError(f'{name}: annotation file {path!r} {state} (it must be one JSON object or '
                                 'list). Re-download or regenerate it.')


def _classification_ann_file(dataset_cfg: dict) -> Optional[str]:
    """The ``<path> <label>`` list of an mmpretrain dataset: ``ann_file``, or ImageNet's ``meta/<split>.txt``."""
    root = dataset_cfg.get('data_root') or ''
    if dataset_cfg.get('ann_file'):
        return osp.join(root, dataset_cfg['ann_file'])
    split_file = osp.join(root, 'meta', f'{dataset_cfg["split"]}.txt') if dataset_cfg.get('split') else ''
    return split_file if split_file and osp.isfile(split_file) else None


def _check_classification_labels(name: str, path: str, num_classes: Optional[int]) -> None:
    """Every non-empty line of ``path`` is ``<image path> <integer label>`` with ``0 <= label < num_classes``."""
    with open(path, encoding='utf-8', errors='replace') as file:
        for number, line in enumerate(file, start=1):
            fields = line.rsplit(maxsplit=1)
            if not fields:
                continue
            label = fields[-1] if len(fields) == 2 else ''
            if not label.lstrip('-').isdigit():
                raise DatasetFormatError(f'{name}: {path!r} line {number} is {line.strip()!r}; every line must be '
                                         '"<image path> <integer label>".')
            if num_classes is not None and not 0 <= int(label) < num_classes:
                raise DatasetFormatError(f'{name}: {path!r} line {number} has label {label}, outside 0..'
                                         f'{num_classes - 1} for the {num_classes} classes of metainfo.classes. '
                                         'Fix the annotation file or the classes.')


def _relative_stems(folder: str, suffix: str) -> Iterator[str]:
    """Paths under ``folder`` (recursively, relative) that end with ``suffix``, without it."""
    for parent, _, files in os.walk(folder):
        for file in files:
            if file.endswith(suffix):
                yield osp.relpath(osp.join(parent, file), folder)[:-len(suffix)]


def _decoded_size(name: str, path: str, exif_rotation: bool) -> Tuple[int, int]:
    """``(width, height)`` of the image file ``path`` from its header (with ``exif_rotation``, after the rotation
    its EXIF orientation asks for, as mmcv decodes colour images); a file that is empty or not an image raises
    :class:`DatasetFormatError`."""
    try:
        with Image.open(path) as image:
            width, height = image.size
            rotated = exif_rotation and image.getexif().get(EXIF_ORIENTATION, 1) in TRANSPOSING_ORIENTATIONS
    except (OSError, SyntaxError) as error:  # PIL's UnidentifiedImageError is an OSError
        state = 'is empty' if osp.getsize(path) == 0 else f'is not a readable image ({error})'
        raise DatasetFormatError(f'{name}: {path!r} {state}. Replace it or remove it from the dataset.') from None
    return (height, width) if rotated else (width, height)


def _listed_stems(name: str, ann_file: str, img_dir: str, img_suffix: str) -> List[str]:
    """The image stems an mmseg ``ann_file`` lists (one per line, as ``BaseSegDataset`` reads it), each checked to
    exist in ``img_dir``."""
    stems = [line.strip() for line in open(ann_file, encoding='utf-8') if line.strip()]
    absent = [stem for stem in stems if not osp.isfile(osp.join(img_dir, stem + img_suffix))]
    if absent:
        raise DatasetFormatError(f'{name}: {ann_file!r} lists {len(absent)} image(s) that {img_dir!r} does not have '
                                 f'(first: {absent[0] + img_suffix}). Fix the list or add the images.')
    return stems


def _check_segmentation_pairs(name: str, dataset_cfg: dict) -> None:
    """Every image of an mmseg dataset (the image folder's, or those its ``ann_file`` lists) has a segmentation map
    of its size (the loaders would otherwise pair pixels with the labels of other pixels, or fail in a later
    crop)."""
    root = dataset_cfg.get('data_root') or ''
    prefix = dataset_cfg.get('data_prefix') or {}
    if not prefix.get('img_path') or not prefix.get('seg_map_path'):
        return
    img_suffix = dataset_cfg.get('img_suffix', '.jpg')
    seg_suffix = dataset_cfg.get('seg_map_suffix', '.png')
    img_dir, seg_dir = osp.join(root, prefix['img_path']), osp.join(root, prefix['seg_map_path'])
    ann_file = dataset_cfg.get('ann_file')
    if ann_file:
        ann_file = ann_file if osp.isabs(ann_file) else osp.join(root, ann_file)
        if not osp.isfile(ann_file):
            return  # check_dataset_paths names a missing file
        images = _listed_stems(name, ann_file, img_dir, img_suffix)
        missing = [stem for stem in images if not osp.isfile(osp.join(seg_dir, stem + seg_suffix))]
    else:
        images = sorted(_relative_stems(img_dir, img_suffix))
        missing = sorted(set(images) - set(_relative_stems(seg_dir, seg_suffix)))
    if missing:
        raise DatasetFormatError(f'{name}: {len(missing)} image(s) in {img_dir!r} have no segmentation map in '
                                 f'{seg_dir!r} (first: {missing[0] + img_suffix} needs {missing[0] + seg_suffix}). '
                                 'Add the maps or remove the images.')
    for stem in images:
        image, seg_map = osp.join(img_dir, stem + img_suffix), osp.join(seg_dir, stem + seg_suffix)
        image_size = _decoded_size(name, image, exif_rotation=True)
        map_size = _decoded_size(name, seg_map, exif_rotation=False)
        if image_size != map_size:
            raise DatasetFormatError(f'{name}: segmentation map {seg_map!r} is {map_size[0]}x{map_size[1]} (WxH) but '
                                     f'its image {image!r} is {image_size[0]}x{image_size[1]}. Every map must have '
                                     'the size of its image: regenerate or resize the maps (nearest neighbour).')


def _check_segmentation_classes(name: str, dataset_cfg: dict, dataset_class: type) -> None:
    """``metainfo.classes`` must be a subset of the dataset type's own classes (mmseg raises a ``ValueError``
    with all of them deep in the dataloader build otherwise)."""
    own = (getattr(dataset_class, 'METAINFO', None) or {}).get('classes')
    classes = (dataset_cfg.get('metainfo') or {}).get('classes')
    unknown = [c for c in classes or () if own and c not in own]
    if unknown:
        raise DatasetFormatError(f'{name}: metainfo.classes {unknown} are not classes of '
                                 f'{dataset_class.__name__} ({len(own)} classes, e.g. {list(own[:3])}). Use its class '
                                 'names, or type=\'BaseSegDataset\' for classes of your own.')


def check_dataset_files(cfg: Config, dataloaders: Sequence[str]) -> None:
    """Cheap content checks of the datasets of ``cfg[<dataloader>]`` (run after :func:`check_dataset_paths`).

    Raises :class:`DatasetFormatError` for an empty or truncated JSON annotation file, a classification
    annotation line that is not ``<path> <label>`` or whose label is out of range, mmseg class names the
    dataset type does not have, and an mmseg image without its segmentation map, or with a map of another size,
    or either file empty or not an image.
    """
    from mmpretrain.datasets import CustomDataset
    from mmseg.datasets import BaseSegDataset
    for name in dataloaders:
        loader = cfg.get(name)
        if not loader or 'dataset' not in loader:
            continue
        for dataset in _leaf_datasets(loader['dataset']):
            root = dataset.get('data_root') or ''
            ann_file = osp.join(root, dataset['ann_file']) if dataset.get('ann_file') else ''
            if ann_file.endswith('.json') and osp.isfile(ann_file):
                _check_json_complete(name, ann_file)
            cls_type = _dataset_class(dataset, 'mmpretrain.registry')
            with_label = dataset.get('with_label', True) and dataset.get('split') != 'test'  # ImageNet: no labels
            if cls_type is not None and issubclass(cls_type, CustomDataset) and with_label:
                labels = _classification_ann_file(dataset)
                classes = (dataset.get('metainfo') or {}).get('classes') or cls_type.METAINFO.get('classes')
                if labels and osp.isfile(labels):
                    _check_classification_labels(name, labels, len(classes) if classes else None)
            seg_type = _dataset_class(dataset, 'mmseg.registry')
            if seg_type is not None and issubclass(seg_type, BaseSegDataset):
                _check_segmentation_classes(name, dataset, seg_type)
                _check_segmentation_pairs(name, dataset)


def _leaf_dataset_objects(dataset: Any) -> Iterator[Any]:
    """The real datasets inside built wrappers (``RepeatDataset.dataset``, ``ConcatDataset.datasets``)."""
    inner = getattr(dataset, 'datasets', None) or ([dataset.dataset] if hasattr(dataset, 'dataset') else [])
    if not inner:
        yield dataset
    for child in inner:
        yield from _leaf_dataset_objects(child)


def _describe(dataset: Any) -> str:
    where = getattr(dataset, 'ann_file', '') or getattr(dataset, 'data_prefix', '') or getattr(dataset, 'data_root', '')
    return f'{type(dataset).__name__} ({where})'


def _coco_category_names(ann_file: str) -> List[str]:
    """The category names of a COCO annotation file (read again only to word an error: mmdet drops its
    ``COCO`` object after loading)."""
    with open(ann_file, encoding='utf-8') as file:
        return [category['name'] for category in json.load(file).get('categories', [])]


def check_built_datasets(datasets: Sequence[Tuple[str, Any]]) -> None:
    """Raise :class:`DatasetFormatError` for a built dataset without samples, or a COCO-style dataset
    (``cat_ids``) whose ``metainfo['classes']`` names categories its annotation file does not have (mmdet
    then silently drops them and shifts the labels of the others). ``datasets``: ``(dataloader name,
    dataset)`` pairs."""
    for name, built in datasets:
        for dataset in _leaf_dataset_objects(built):
            classes = list((getattr(dataset, 'metainfo', None) or {}).get('classes') or [])
            if classes and len(getattr(dataset, 'cat_ids', classes)) != len(classes):
                known = _coco_category_names(dataset.ann_file)
                unknown = [c for c in classes if c not in known]
                raise DatasetFormatError(f'{name}: metainfo.classes {unknown} are not categories of '
                                         f'{_describe(dataset)}, which has {known}. Fix the class names.')
            if len(dataset) == 0:
                raise no_samples_error(dataset, name)


def no_samples_error(dataset: Any, name: str = '') -> DatasetFormatError:
    """The :class:`DatasetFormatError` for the built ``dataset`` (of the dataloader ``name``) that has no samples."""
    hint = (' (filter_cfg.filter_empty_gt drops images without annotations of metainfo.classes)'
            if (getattr(dataset, 'filter_cfg', None) or {}).get('filter_empty_gt') else '')
    return DatasetFormatError(f'{name + ": " if name else ""}{_describe(dataset)} has no samples{hint}. Check the '
                              'annotation file, the image folder and metainfo.classes.')
