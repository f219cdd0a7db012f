"""Fail early, with the paths and the fix, when a config's dataset is not on disk.

The dataset classes of mmpretrain/mmseg/mmdet only notice a missing dataset deep inside their
constructors (``os.scandir``/``open`` tracebacks from the Runner's dataloader build). ``tools/train.py``
and ``tools/test.py`` call :func:`check_dataset_paths` before building the Runner.
"""
import os.path as osp
from typing import Iterator, List, Sequence

from mmengine.config import Config

WRAPPER_KEYS = ('dataset', 'datasets')


class DatasetNotFoundError(FileNotFoundError):
    """A dataset path named by the config does not exist."""


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
    elif dataset_cfg.get('split'):  # mmpretrain ImageNet: <data_root>/<split>
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
                    f'exist. Put the dataset there (README, "Training and testing"), or point the config '
                    f'elsewhere with --cfg-options {name}.dataset.data_root=PATH. For a quick try, the '
                    'embedded synthetic data: python tools/dataset_converters/make_shapes_datasets.py')
