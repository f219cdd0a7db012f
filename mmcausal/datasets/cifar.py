"""mmpretrain's CIFAR loaders for a copy in the official file layout that is not the official files.

mmpretrain's ``CIFAR10`` / ``CIFAR100`` accept a folder only if every file has the MD5 sum of Krizhevsky's archive
(``_check_integrity``), and otherwise download the archive (``download=True``, the default) or stop. A copy in the
same layout (the shapes data's CIFAR-format copy, :func:`mmcausal.datasets.shapes.make_cifar_like`, or a re-packed
subset) can never pass. :class:`UncheckedCIFAR10` / :class:`UncheckedCIFAR100` are the same loaders with the
checksums removed and the download disabled: a missing file is named in one line instead. The official data needs
neither: the stock classes read it from a local folder as they are.
"""
from typing import List

from mmengine.fileio import exists, join_path
from mmpretrain.datasets import CIFAR10, CIFAR100

from mmcausal.registry import DATASETS
from mmcausal.utils import ConfigValueError, DatasetNotFoundError


def _unchecked(files: List[list]) -> List[list]:
    """``[[name, md5], ...]`` -> ``[[name, None], ...]`` (mmpretrain skips the check of a ``None`` sum)."""
    return [[name, None] for name, _ in files]


class _UncheckedMixin:
    """No checksums, no download; a missing file ends in a :class:`DatasetNotFoundError` naming it."""

    official_type = ''  # the stock class, for the official files

    def __init__(self, *args, download: bool = False, **kwargs) -> None:
        if download:
            raise ConfigValueError(f'{type(self).__name__} reads a local copy only (download=False); for the official '
                                   f'data use type={self.official_type!r}.')
        super().__init__(*args, download=False, **kwargs)

    def load_data_list(self):
        folder = join_path(self.data_prefix['root'], self.base_folder)
        names = [name for name, _ in self.train_list + self.test_list] + [self.meta['filename']]
        missing = [name for name in names if not exists(join_path(folder, name))]
        if missing:
            raise DatasetNotFoundError(
                f'{type(self).__name__}: {folder!r} has no {", ".join(missing)}. Write the shapes copy with '
                '`python tools/dataset_converters/make_shapes_datasets.py --which cifar10 cifar100`, or point '
                'data_root / data_prefix at the folder holding ' + repr(self.base_folder) + '.')
        return super().load_data_list()


@DATASETS.register_module()
class UncheckedCIFAR10(_UncheckedMixin, CIFAR10):
    """``CIFAR10`` for a copy in the CIFAR-10 python layout (``cifar-10-batches-py/``): no MD5 sums, no download.

    Classes: ``metainfo`` if given, else the ten CIFAR-10 names (``CIFAR10.METAINFO``), as for ``CIFAR10``.
    """
    official_type = 'CIFAR10'
    train_list = _unchecked(CIFAR10.train_list)
    test_list = _unchecked(CIFAR10.test_list)
    meta = dict(CIFAR10.meta, md5=None)


@DATASETS.register_module()
class UncheckedCIFAR100(_UncheckedMixin, CIFAR100):
    """``CIFAR100`` for a copy in the CIFAR-100 python layout (``cifar-100-python/``): no MD5 sums, no download."""
    official_type = 'CIFAR100'
    train_list = _unchecked(CIFAR100.train_list)
    test_list = _unchecked(CIFAR100.test_list)
    meta = dict(CIFAR100.meta, md5=None)
