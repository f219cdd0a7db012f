"""The dataset pre-check names the folders a dataset config reads: an ImageNet split is a folder of its root, a CIFAR
split names batch files, so a CIFAR root without a ``train`` folder is not reported missing."""
import pytest
from mmengine.config import Config

from mmcausal.utils.dataset_check import DatasetNotFoundError, check_dataset_paths


def _config(dataset: dict) -> Config:
    return Config(dict(train_dataloader=dict(dataset=dataset)))


def test_imagenet_split_is_a_folder(tmp_path):
    with pytest.raises(DatasetNotFoundError, match=f"expects '{tmp_path / 'train'}'"):
        check_dataset_paths(_config(dict(type='ImageNet', data_root=str(tmp_path), split='train')),
                            ['train_dataloader'])
    (tmp_path / 'train').mkdir()
    check_dataset_paths(_config(dict(type='ImageNet', data_root=str(tmp_path), split='train')), ['train_dataloader'])


def test_cifar_split_is_not_a_folder_but_the_root_must_exist(tmp_path):
    check_dataset_paths(_config(dict(type='CIFAR10', data_root=str(tmp_path), split='train')), ['train_dataloader'])
    with pytest.raises(DatasetNotFoundError, match='missing'):
        check_dataset_paths(_config(dict(type='CIFAR10', data_root=str(tmp_path / 'missing'), split='train')),
                            ['train_dataloader'])
