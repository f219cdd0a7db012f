"""The image-text datasets (:mod:`mmcausal.datasets.image_text`) over the shapes caption set: the caption table and
the image folder, and the webdataset shards split over ranks and DataLoader workers."""
import importlib
import io
import sys
import tarfile
from pathlib import Path

import mmcv
import numpy as np
import pytest
from mmengine.dataset import pseudo_collate
from mmengine.runner import Runner
from torch.utils.data import DataLoader

from mmcausal.datasets import ImageTextDataset, WebDatasetImageText
from mmcausal.datasets import image_text as module
from mmcausal.datasets.shapes import make_captioned_like
from mmcausal.utils import ConfigValueError, DatasetNotFoundError
from mmcausal.utils.dataset_check import DatasetFormatError

PACK = [dict(type='PackInputs', algorithm_keys=['text'])]
TRAIN_SHARDS = 'shards/train-{000000..000003}.tar'


@pytest.fixture(scope='module')
def root(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp('captions')
    make_captioned_like(str(path), num_train=16, num_val=4, image_size=32, num_shards=4)
    return path


def shard_dataset(root: Path, **kwargs) -> WebDatasetImageText:
    return WebDatasetImageText(**dict(dict(urls=TRAIN_SHARDS, data_root=str(root), num_samples=16), **kwargs))


def keys(items) -> list:
    return [item['img_path'].split('#')[1] for item in items]


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert '\n' not in message and error.value.__cause__ is None
    assert error.value.__context__ is None or error.value.__suppress_context__
    return message


def test_table_and_folder_give_the_same_pairs(root):
    table = ImageTextDataset(data_root=str(root), ann_file='train.tsv')
    folder = ImageTextDataset(data_root=str(root), data_prefix=dict(img_path='images/train'))
    pairs = [(Path(d['img_path']).resolve(), d['text']) for d in (table.get_data_info(i) for i in range(16))]
    assert pairs == [(Path(d['img_path']).resolve(), d['text']) for d in (folder.get_data_info(i) for i in range(16))]
    assert pairs[5][0] == (root / 'images/train/train_000005.jpg').resolve()
    assert table.metainfo == {}


def test_pipeline_packs_the_caption_into_the_data_sample(root):
    dataset = ImageTextDataset(data_root=str(root), ann_file='val.tsv',
                               pipeline=[dict(type='LoadImageFromFile'), *PACK])
    packed = dataset[2]
    assert tuple(packed['inputs'].shape) == (3, 32, 32)
    assert packed['data_samples'].text == (root / 'images/val/val_000002.txt').read_text()


def test_bad_table_or_folder_is_one_line(root, tmp_path):
    with pytest.raises(DatasetNotFoundError) as error:
        ImageTextDataset(data_root=str(root), ann_file='test.tsv')
    assert 'test.tsv' in one_line(error) and "ann_file=''" in str(error.value)
    with pytest.raises(DatasetFormatError) as error:
        ImageTextDataset(data_root=str(root), ann_file='train.tsv', img_key='url')
    assert "no column 'url'" in one_line(error) and "['filepath', 'title']" in str(error.value)
    with pytest.raises(DatasetFormatError) as error:
        ImageTextDataset(data_root=str(root), ann_file='train.tsv', separator=',')
    assert "no column 'filepath'" in one_line(error)
    with pytest.raises(DatasetNotFoundError) as error:
        ImageTextDataset(data_root=str(root), data_prefix=dict(img_path='images/test'))
    assert 'images/test' in one_line(error)
    (tmp_path / 'a.jpg').write_bytes((root / 'images/val/val_000000.jpg').read_bytes())
    with pytest.raises(DatasetFormatError) as error:
        ImageTextDataset(data_root=str(tmp_path))
    assert "a.jpg' has no caption file 'a.txt'" in one_line(error)


def test_shards_hold_the_images_and_captions_of_the_table(root):
    table = {Path(d['img_path']).stem: d for d in ImageTextDataset(data_root=str(root), ann_file='train.tsv')}
    items = list(shard_dataset(root))
    assert sorted(keys(items)) == sorted(table) and len(items) == 16
    for item in items:
        expected = table[item['img_path'].split('#')[1]]
        assert item['text'] == expected['text']
        assert np.array_equal(item['img'], mmcv.imread(expected['img_path']))  # what LoadImageFromFile reads (BGR)
        assert item['img_shape'] == item['ori_shape'] == (32, 32) and item['img'].dtype == np.uint8
        assert item['gt_label'] == int(expected['img_path'][-8:-4]) % 4
    assert items[0]['img_path'] == f'{root}/shards/train-000000.tar#train_000000'
    packed = next(iter(shard_dataset(root, pipeline=PACK)))
    assert packed['data_samples'].text == items[0]['text'] and tuple(packed['inputs'].shape) == (3, 32, 32)


def test_ranks_read_disjoint_shards_covering_all(root, monkeypatch):
    seen = []
    for rank in range(2):
        monkeypatch.setattr(module, 'get_dist_info', lambda rank=rank: (rank, 2))
        dataset = shard_dataset(root, shuffle_buffer=4)
        assert len(dataset) == 8
        seen.append(set(keys(dataset)))
    assert not seen[0] & seen[1] and len(seen[0] | seen[1]) == 16


def test_workers_split_the_shards_and_epochs_reshuffle(root):
    """Non-persistent workers are new processes every epoch; the shared counters still advance the epoch."""
    dataset = shard_dataset(root, shuffle_buffer=6, seed=3)
    loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=list)
    epochs = [keys(item for batch in loader for item in batch) for _ in range(2)]
    assert all(sorted(epoch) == sorted(epochs[0]) and len(set(epoch)) == 16 for epoch in epochs)
    assert epochs[0] != epochs[1] and len(loader) == 4
    first, second = shard_dataset(root, shuffle_buffer=6, seed=3), shard_dataset(root, shuffle_buffer=6, seed=3)
    orders = [keys(first) for _ in range(3)]
    assert orders == [keys(second) for _ in range(3)] and len({tuple(o) for o in orders}) == 3  # reproducible
    assert keys(shard_dataset(root, shuffle_buffer=6, seed=4)) != orders[0]
    resumed = shard_dataset(root, shuffle_buffer=6, seed=3)
    resumed.set_epoch(2)
    assert keys(resumed) == orders[2]


def test_unshuffled_order_and_resampling(root):
    assert keys(shard_dataset(root)) == [f'train_{i:06d}' for i in range(16)]
    resampled = shard_dataset(root, resampled=True, num_samples=24, seed=1)
    drawn = [keys(resampled) for _ in range(2)]
    assert all(len(epoch) == 24 for epoch in drawn) and drawn[0] != drawn[1]
    again = shard_dataset(root, resampled=True, num_samples=24, seed=1)
    assert [keys(again) for _ in range(2)] == drawn


def test_runner_builds_a_dataloader_without_sampler(root):
    for collate in (dict(type='default_collate'), dict(type='pseudo_collate')):
        loader = Runner.build_dataloader(dict(
            batch_size=4, num_workers=0, sampler=None, collate_fn=collate,
            dataset=dict(type='WebDatasetImageText', data_root=str(root), urls=TRAIN_SHARDS, num_samples=16,
                         pipeline=PACK)))
        batches = list(loader)
        assert len(loader) == len(batches) == 4 and len(batches[0]['data_samples']) == 4
        assert batches[0]['data_samples'][1].text


def test_names_resolve_from_every_library():
    for library in ('mmpretrain', 'mmseg', 'mmdet'):
        registry = importlib.import_module(f'{library}.registry').DATASETS
        assert registry.get('ImageTextDataset') is ImageTextDataset
        assert registry.get('WebDatasetImageText') is WebDatasetImageText


def write_tar(path: Path, members: dict) -> None:
    with tarfile.open(path, 'w') as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_bad_shards_and_settings_are_one_line(root, tmp_path, monkeypatch):
    write_tar(tmp_path / 'bad.tar', {'k1.jpg': b'not a jpeg', 'k1.txt': b'a red circle.'})
    with pytest.raises(DatasetFormatError) as error:
        list(WebDatasetImageText(urls='bad.tar', data_root=str(tmp_path), num_samples=1))
    assert f"{tmp_path}/bad.tar#k1 .jpg is not a readable image" in one_line(error)
    write_tar(tmp_path / 'notext.tar', {'k2.png': (root / 'images/val/val_000000.jpg').read_bytes()})
    with pytest.raises(DatasetFormatError, match='#k2 has no .txt caption member'):
        list(WebDatasetImageText(urls='notext.tar', data_root=str(tmp_path), num_samples=1))
    (tmp_path / 'broken.tar').write_bytes((root / 'shards/val-000000.tar').read_bytes()[:1000])
    with pytest.raises(DatasetFormatError) as error:
        list(WebDatasetImageText(urls='broken.tar', data_root=str(tmp_path), num_samples=4))
    assert 'broken.tar' in one_line(error) and 'cannot be read' in str(error.value)
    with pytest.raises(DatasetNotFoundError) as error:
        shard_dataset(root, urls='shards/train-{000000..000009}.tar')
    assert 'train-000004.tar' in one_line(error) and '6 of 10 missing' in str(error.value)
    with pytest.raises(ConfigValueError, match='num_samples must be a positive integer'):
        shard_dataset(root, num_samples=0)
    with pytest.raises(ConfigValueError, match=r'1 shards cannot be split over 1 rank\(s\) x 2 worker'):
        list(DataLoader(shard_dataset(root, urls='shards/val-{000000..000000}.tar', num_samples=4), num_workers=2,
                        collate_fn=pseudo_collate))
    monkeypatch.setitem(sys.modules, 'webdataset', None)
    with pytest.raises(ImportError, match=r'pip install webdataset==1.0.2 -c requirements/constraints.txt'):
        shard_dataset(root)


def test_skipped_samples_and_uneven_shards_still_fill_every_rank(root, tmp_path, monkeypatch):
    """``on_error='skip'`` leaves a broken sample out with a warning; 3 shards over 2 ranks (2 + 1) still give both
    ranks ``len()`` samples (the short rank goes round its shard again), so no rank waits for another."""
    good = (root / 'images/val/val_000000.jpg').read_bytes()
    write_tar(tmp_path / 'mixed.tar', {'k1.jpg': b'not a jpeg', 'k1.txt': b'a red circle.', 'k2.jpg': good,
                                       'k2.txt': b'a blue cross.'})
    with pytest.warns(UserWarning, match='#k1 .jpg is not a readable image'):
        kept = list(WebDatasetImageText(urls='mixed.tar', data_root=str(tmp_path), num_samples=2, on_error='skip'))
    assert [sample['text'] for sample in kept] == ['a blue cross.'] * 2
    for rank in range(2):
        monkeypatch.setattr(module, 'get_dist_info', lambda rank=rank: (rank, 2))
        dataset = shard_dataset(root, urls='shards/train-{000000..000002}.tar', num_samples=16)
        assert len(keys(dataset)) == len(dataset) == 8


def test_dataset_epoch_hook_gives_a_resumed_run_its_epochs_order(root):
    from types import SimpleNamespace

    from mmcausal.engine.hooks import DatasetEpochHook
    orders = [keys(dataset) for dataset in [shard_dataset(root, shuffle_buffer=6, seed=3)] for _ in range(3)]
    resumed = shard_dataset(root, shuffle_buffer=6, seed=3)
    DatasetEpochHook().before_train_epoch(SimpleNamespace(epoch=2, train_dataloader=SimpleNamespace(dataset=resumed)))
    assert keys(resumed) == orders[2] != orders[0]
