"""The shapes caption set (:mod:`mmcausal.datasets.shapes.captions`): one image folder, tsv, ann file and webdataset
shards describing the same captioned images, and its option of tools/dataset_converters/make_shapes_datasets.py."""
import importlib.util
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
from mmpretrain.datasets import CustomDataset
from PIL import Image

from mmcausal.datasets import shapes
from mmcausal.datasets.shapes import CAPTION_WORDS, SHAPE_CLASSES, make_captioned_like
from mmcausal.datasets.shapes.captions import COLOURS, NUMBER_WORDS, PLURALS, TEMPLATES, caption_text

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(num_train=16, num_val=8, image_size=32, num_shards=3)


@pytest.fixture(scope='module')
def captions_root(tmp_path_factory):
    root = tmp_path_factory.mktemp('captions')
    return root, make_captioned_like(str(root), **SMALL)


def read_tsv(path: Path) -> list:
    lines = path.read_text(encoding='utf-8').splitlines()
    assert lines[0] == 'filepath\ttitle'
    return [tuple(line.split('\t')) for line in lines[1:]]


def read_shards(root: Path, pattern: str) -> dict:
    """``key -> {ext: bytes}`` of all shards of a ``{a..b}`` pattern, read with the standard library."""
    first, last = re.search(r'\{(\d+)\.\.(\d+)\}', pattern).groups()
    out = {}
    for number in range(int(first), int(last) + 1):
        path = root / re.sub(r'\{.*\}', f'{number:06d}', pattern)
        with tarfile.open(path) as tar:
            for member in tar.getmembers():
                key, ext = member.name.split('.')
                out.setdefault(key, {})[ext] = tar.extractfile(member).read()
    return out


def words_of(caption: str) -> list:
    assert caption.endswith('.') and caption == caption.lower()
    return caption[:-1].split()


def test_summary_and_layout(captions_root):
    root, summary = captions_root
    assert summary['classes'] == SHAPE_CLASSES and summary['num_images'] == dict(train=16, val=8)
    assert summary['shards'] == dict(train='shards/train-{000000..000002}.tar', val='shards/val-{000000..000000}.tar')
    assert sorted(p.name for p in (root / 'shards').iterdir()) == [
        'train-000000.tar', 'train-000001.tar', 'train-000002.tar', 'val-000000.tar']
    assert summary['words'] == list(CAPTION_WORDS)
    with Image.open(root / 'images/train/train_000003.jpg') as image:
        assert (image.format, image.mode, image.size) == ('JPEG', 'RGB', (32, 32))


def test_every_description_names_the_same_images_and_captions(captions_root):
    root, _ = captions_root
    for split, count in (('train', 16), ('val', 8)):
        rows = read_tsv(root / f'{split}.tsv')
        assert [path for path, _ in rows] == [f'images/{split}/{split}_{i:06d}.jpg' for i in range(count)]
        for path, caption in rows:  # the folder layout: the caption beside the image
            assert (root / path).with_suffix('.txt').read_text(encoding='utf-8') == caption
        labels = [(path, int(label)) for path, label in
                  (line.split() for line in (root / f'meta/{split}.txt').read_text().splitlines())]
        assert labels == [(path, i % 4) for i, (path, _) in enumerate(rows)]  # balanced: i % 4
        members = read_shards(root, f'shards/{split}-{{000000..{2 if split == "train" else 0:06d}}}.tar')
        assert sorted(members) == [Path(path).stem for path, _ in rows]
        for (path, caption), (_, label) in zip(rows, labels):
            member = members[Path(path).stem]
            assert member['jpg'] == (root / path).read_bytes()
            assert member['txt'].decode() == caption and int(member['cls']) == label


def test_captions_name_class_colour_and_count(captions_root):
    root, _ = captions_root
    colours, named = set(COLOURS), []
    for split in ('train', 'val'):
        for index, (_, caption) in enumerate(read_tsv(root / f'{split}.tsv')):
            words = words_of(caption)
            assert set(words) <= set(CAPTION_WORDS), caption
            shape = SHAPE_CLASSES[index % 4]
            singular, plural = shape in words, PLURALS[shape] in words
            assert singular != plural, caption
            assert not (set(words) & (set(SHAPE_CLASSES) | set(PLURALS.values()))) - {shape, PLURALS[shape]}
            assert len(set(words) & colours) <= 1, caption
            named.append(bool(set(words) & colours))
            assert plural == bool({'two', 'three'} & set(words)), caption
    assert 0.15 < sum(named) / len(named) < 0.85  # the colour is named in about half of the (few) captions


def test_caption_grammar_and_vocabulary():
    assert caption_text('there {be} {things}.', 1, 'orange', 'cross', 'dark') == 'there is an orange cross.'
    assert caption_text('{things} on a {tone} background.', 3, 'red', 'cross', 'light') == \
        'three red crosses on a light background.'
    assert caption_text('a photo of {things}.', 1, None, 'circle', 'dark') == 'a photo of a circle.'
    assert CAPTION_WORDS == tuple(sorted(set(CAPTION_WORDS)))
    assert {'a', 'photo', 'of', *SHAPE_CLASSES} <= set(CAPTION_WORDS)  # the zero-shot prompt
    every = {word for template in TEMPLATES for count in (1, 2, 3) for colour in COLOURS for shape in SHAPE_CLASSES
             for tone in ('dark', 'light') for word in words_of(caption_text(template, count, colour, shape, tone))}
    assert every | {'photo', 'of'} == set(CAPTION_WORDS) and all(re.fullmatch('[a-z]+', w) for w in every)
    assert NUMBER_WORDS[0] == 'a'


def test_the_val_split_loads_as_an_mmpretrain_classification_set(captions_root):
    root, _ = captions_root
    dataset = CustomDataset(data_root=str(root), ann_file='meta/val.txt', with_label=True,
                            metainfo=dict(classes=SHAPE_CLASSES), pipeline=[dict(type='LoadImageFromFile')])
    assert len(dataset) == 8 and dataset.get_gt_labels().tolist() == [0, 1, 2, 3] * 2
    assert dataset[5]['img'].shape == (32, 32, 3)


def test_same_seed_same_bytes_other_seed_other_images_and_reuse(tmp_path, captions_root):
    root, summary = captions_root
    again = make_captioned_like(str(tmp_path / 'b'), **SMALL)
    for name in ('images/train/train_000005.jpg', 'train.tsv', 'shards/train-000001.tar', 'meta/val.txt'):
        assert (root / name).read_bytes() == (tmp_path / 'b' / name).read_bytes(), name
    stamp = (root / 'train.tsv').stat().st_mtime_ns
    assert make_captioned_like(str(root), **SMALL) == summary and (root / 'train.tsv').stat().st_mtime_ns == stamp
    assert again['shards'] == summary['shards']
    other = make_captioned_like(str(tmp_path / 'c'), **dict(SMALL, seed=1))
    assert other['num_images'] == summary['num_images']
    assert (tmp_path / 'c/images/train/train_000005.jpg').read_bytes() != (root / 'images/train/train_000005.jpg'
                                                                          ).read_bytes()
    assert json.loads((root / 'shapes_meta.json').read_text())['params']['dataset'] == 'captions'


@pytest.mark.parametrize('style', ['v2', 'v3'])
def test_other_styles_draw_their_backgrounds(tmp_path, style):
    make_captioned_like(str(tmp_path), num_train=4, num_val=4, image_size=32, num_shards=1, style=style)
    rows = read_tsv(tmp_path / 'train.tsv')
    assert all(set(words_of(caption)) <= set(CAPTION_WORDS) for _, caption in rows)
    pixels = np.asarray(Image.open(tmp_path / rows[0][0]))
    assert pixels.shape == (32, 32, 3)


def test_refuses_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match='num_shards must be in 1..num_train'):
        make_captioned_like(str(tmp_path), num_train=2, num_val=1, num_shards=3)
    with pytest.raises(ValueError, match='num_train and num_val must be at least 1'):
        make_captioned_like(str(tmp_path), num_train=0)
    with pytest.raises(ValueError, match='style must be one of'):
        make_captioned_like(str(tmp_path), style='v9')


def test_docs_and_tool_name_the_set(tmp_path, monkeypatch, capsys):
    assert 'make_captioned_like' in shapes.__doc__ and 'CAPTION_WORDS' in shapes.__doc__
    spec = importlib.util.spec_from_file_location('make_shapes_tool_captions',
                                                  ROOT / 'tools/dataset_converters/make_shapes_datasets.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert '--which captions' in tool.__doc__ and 'captions' not in tool.parse_args([]).which  # on request
    with pytest.raises(SystemExit):
        tool.parse_args(['--help'])
    assert 'captions on request' in ' '.join(capsys.readouterr().out.split())
    tool_shapes = tool.load_shapes_module()
    original = tool_shapes.make_captioned_like
    monkeypatch.setattr(tool_shapes, 'make_captioned_like', lambda root, **kwargs: original(root, **kwargs, **SMALL))
    tool.main(['--out', str(tmp_path), '--which', 'captions'])
    assert capsys.readouterr().out.startswith(f'captions: {tmp_path / "captions"} | images: train 16, val 8')
    assert (tmp_path / 'captions/shards/train-000002.tar').is_file()
