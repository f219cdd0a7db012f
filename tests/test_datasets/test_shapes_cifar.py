"""The CIFAR-format copy of the shapes data (:mod:`mmcausal.datasets.shapes.cifar`): the python-pickle files of the
CIFAR-10 / CIFAR-100 archives, read by mmpretrain's loaders without the official checksums
(:mod:`mmcausal.datasets.cifar`), and the generator tool's ``--which cifar10 cifar100``."""
import importlib.util
import json
import pickle
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from mmpretrain.datasets import CIFAR10

from mmcausal.datasets import UncheckedCIFAR10, UncheckedCIFAR100
from mmcausal.datasets.shapes import SHAPE_CLASSES, make_cifar_like
from mmcausal.datasets.shapes.cifar import render_cifar_split
from mmcausal.utils import ConfigValueError, DatasetNotFoundError

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / 'tools' / 'dataset_converters' / 'make_shapes_datasets.py'
SMALL = dict(num_train_per_class=3, num_test_per_class=2)


def unpickle(path: Path) -> dict:
    """As mmpretrain (and torchvision) read the official files."""
    return pickle.loads(path.read_bytes(), encoding='latin1')


@pytest.fixture(scope='module')
def cifar_roots(tmp_path_factory):
    root = tmp_path_factory.mktemp('shapes_cifar')
    return {variant: make_cifar_like(str(root / variant), variant=variant, **SMALL)['root']
            for variant in ('cifar10', 'cifar100')}


def test_cifar10_files_are_the_official_layout(cifar_roots):
    folder = Path(cifar_roots['cifar10']) / 'cifar-10-batches-py'
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch', 'batches.meta'])
    batches = [unpickle(folder / f'data_batch_{i}') for i in range(1, 6)]
    assert [len(b['labels']) for b in batches] == [3, 3, 2, 2, 2]  # 12 training images in five batches
    first = batches[0]
    assert set(first) == {'batch_label', 'data', 'labels', 'filenames'}
    assert first['data'].dtype == np.uint8 and first['data'].shape == (3, 3072)
    assert first['labels'] == [0, 1, 2] and first['batch_label'] == 'training batch 1 of 5'
    meta = unpickle(folder / 'batches.meta')
    assert meta == dict(num_cases_per_batch=3, label_names=list(SHAPE_CLASSES), num_vis=3072)
    test = unpickle(folder / 'test_batch')
    assert test['labels'] == [0, 1, 2, 3] * 2


def test_rows_are_planar_rgb_of_the_rendered_image():
    samples = render_cifar_split('train', 1, seed=0)
    image = samples['data'][2].reshape(3, 32, 32).transpose(1, 2, 0)  # the R, G, B planes -> HWC
    from mmcausal.datasets.shapes.styles import get_style, image_rng
    expected = np.asarray(get_style('v1').render_classification(image_rng(0, 'cifar', 'train', 2, 'v1'), 32, 2))
    assert np.array_equal(image, expected) and samples['labels'][2] == 2


def test_cifar100_files_hold_fine_and_coarse_labels(cifar_roots):
    folder = Path(cifar_roots['cifar100']) / 'cifar-100-python'
    assert sorted(p.name for p in folder.iterdir()) == ['meta', 'test', 'train']
    train = unpickle(folder / 'train')
    assert set(train) == {'batch_label', 'data', 'fine_labels', 'coarse_labels', 'filenames'}
    assert train['fine_labels'] == train['coarse_labels'] == [0, 1, 2, 3] * 3
    assert unpickle(folder / 'meta') == dict(fine_label_names=list(SHAPE_CLASSES),
                                             coarse_label_names=list(SHAPE_CLASSES))
    cifar10 = unpickle(Path(cifar_roots['cifar10']) / 'cifar-10-batches-py' / 'test_batch')
    assert np.array_equal(unpickle(folder / 'test')['data'], cifar10['data'])  # the same images in both layouts


@pytest.mark.parametrize('dataset_type,variant', [(UncheckedCIFAR10, 'cifar10'), (UncheckedCIFAR100, 'cifar100')])
def test_mmpretrain_cifar_loaders_read_the_copy(cifar_roots, dataset_type, variant):
    root = str(Path(cifar_roots[variant]).parent)  # data_root + data_prefix, as the twin config names it
    # serialize_data=False: mmengine's serialisation runs gc.collect(), seconds in a process holding torch
    options = dict(data_root=root, data_prefix=variant, metainfo=dict(classes=SHAPE_CLASSES), serialize_data=False)
    train, test = dataset_type(split='train', **options), dataset_type(split='test', **options)
    assert (len(train), len(test)) == (12, 8) and train.metainfo['classes'] == SHAPE_CLASSES
    sample = train.get_data_info(5)
    expected = render_cifar_split('train', 3, seed=0)['data'][5].reshape(3, 32, 32).transpose(1, 2, 0)
    assert sample['gt_label'] == 1 and np.array_equal(sample['img'], expected)


def test_stock_loader_refuses_the_copy_and_unchecked_one_names_missing_files(cifar_roots, tmp_path):
    with pytest.raises(RuntimeError, match='Cannot find CIFAR10'):  # its MD5 sums are the official archive's
        CIFAR10(data_root=cifar_roots['cifar10'], split='train', download=False)
    with pytest.raises(DatasetNotFoundError, match='has no data_batch_1, .*batches.meta'):
        UncheckedCIFAR10(data_root=str(tmp_path), split='train')
    with pytest.raises(ConfigValueError, match="type='CIFAR100'"):
        UncheckedCIFAR100(data_root=str(tmp_path), split='train', download=True)


def test_same_seed_same_bytes_and_a_second_call_reuses_them(tmp_path):
    first = make_cifar_like(str(tmp_path / 'a'), **SMALL)
    again = make_cifar_like(str(tmp_path / 'b'), **SMALL)
    batch = 'cifar-10-batches-py/data_batch_1'
    assert (tmp_path / 'a' / batch).read_bytes() == (tmp_path / 'b' / batch).read_bytes()
    stamp = (tmp_path / 'a' / batch).stat().st_mtime_ns
    assert make_cifar_like(str(tmp_path / 'a'), **SMALL) == first == dict(again, root=first['root'])
    assert (tmp_path / 'a' / batch).stat().st_mtime_ns == stamp
    other = make_cifar_like(str(tmp_path / 'c'), seed=1, **SMALL)
    assert other['num_images'] == first['num_images']
    assert (tmp_path / 'c' / batch).read_bytes() != (tmp_path / 'a' / batch).read_bytes()


def test_cli_writes_cifar_copies_on_request(tmp_path, monkeypatch, capsys):
    """``--which cifar10 cifar100`` reach the writer with each variant (smaller here than the tool's 250 + 50 per
    class, to keep the test short)."""
    spec = importlib.util.spec_from_file_location('make_shapes_datasets', CLI)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    shapes = tool.load_shapes_module()
    monkeypatch.setattr(shapes, 'make_cifar_like', partial(shapes.make_cifar_like, **SMALL))
    tool.main(['--out', str(tmp_path), '--which', 'cifar10', 'cifar100'])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(':')[0] for line in lines] == ['cifar10', 'cifar100'] and 'train 12, test 8' in lines[0]
    assert (tmp_path / 'cifar10' / 'cifar-10-batches-py' / 'data_batch_5').is_file()
    params = json.loads((tmp_path / 'cifar100' / 'shapes_meta.json').read_text())['params']
    assert params['dataset'] == 'cifar100'
