"""The generation recipes' data: ADM's centre crop against the formula (``center_crop_arr`` of dit/train.py), the
moments store that tools/generation/extract_latents.py writes (crop and flip, resumable) and the dataset that reads
it."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import fake_diffusers
from analysis_utils import load_tool
from fake_diffusers import FakeAutoencoderKL
from mmcausal.datasets import LatentMomentsDataset, LatentStoreError
from mmcausal.registry import TRANSFORMS
from report_utils import assert_report_matches


def reference_adm_crop(image: np.ndarray, size: int) -> np.ndarray:
    """ADM's ``center_crop_arr``, written from the formula: BOX-halve while the short side >= 2 size, BICUBIC to a short
    side of size (sides rounded), centre crop with floored offsets."""
    pil = Image.fromarray(image)
    width, height = pil.size
    while min(width, height) >= 2 * size:
        width, height = width // 2, height // 2
        pil = pil.resize((width, height), Image.BOX)
    factor = size / min(width, height)
    pil = pil.resize((round(width * factor), round(height * factor)), Image.BICUBIC)
    out = np.array(pil)
    y, x = (out.shape[0] - size) // 2, (out.shape[1] - size) // 2
    return out[y:y + size, x:x + size]


@pytest.mark.parametrize('shape', [(700, 530, 3), (530, 1101, 3), (50, 37, 3), (64, 64, 3), (301, 129)],
                         ids=['tall-halved-3x', 'wide-halved', 'upscaled', 'exact', 'grey-odd'])
def test_adm_center_crop_is_the_formula(shape):
    rng = np.random.default_rng(sum(shape))
    image = rng.integers(0, 256, shape, dtype=np.uint8)
    crop = TRANSFORMS.build(dict(type='ADMCenterCrop', size=64))
    results = crop(dict(img=image, img_shape=shape[:2]))
    assert results['img'].shape == (64, 64, *shape[2:]) and results['img_shape'] == (64, 64)
    assert np.array_equal(results['img'], reference_adm_crop(image, 64))


def _image_folder(root: Path) -> list:
    """Two classes, three images each, of different sizes; returns the images (RGB) in mmpretrain's order."""
    images = []
    rng = np.random.default_rng(0)
    for label in ('a', 'b'):
        (root / label).mkdir(parents=True)
        for index, size in enumerate(((40, 24), (17, 33), (64, 48))):
            image = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
            Image.fromarray(image).save(root / label / f'{index}.png')
            images.append(image)
    return images


def _expected_moments(image: np.ndarray, size: int) -> np.ndarray:
    crop = torch.from_numpy(reference_adm_crop(image, size)).permute(2, 0, 1)[None].float() / 127.5 - 1
    means = [FakeAutoencoderKL.posterior_mean(x) for x in (crop, crop.flip(3))]
    return torch.stack([torch.cat((mean, mean * 0 - 2), 1)[0] for mean in means]).numpy()


def test_extract_latents_stores_crop_and_flip_moments_and_resumes(tmp_path, monkeypatch):
    fake_diffusers.install(monkeypatch)
    (tmp_path / 'vae').mkdir()
    (tmp_path / 'vae' / 'config.json').write_text('{}')
    images = _image_folder(tmp_path / 'data')
    out = tmp_path / 'latents'
    argv = [str(tmp_path / 'data'), str(out), '--vae', str(tmp_path / 'vae'), '--image-size', '16', '--batch-size',
            '4', '--num-workers', '0', '--device', 'cpu']
    tool = load_tool('extract_latents', 'generation')
    tool.main(argv)
    moments = np.load(out / 'moments.npy')
    assert moments.shape == (6, 2, 8, 2, 2) and moments.dtype == np.float16
    assert np.load(out / 'labels.npy').tolist() == [0, 0, 0, 1, 1, 1]
    for stored, image in zip(moments, images):
        np.testing.assert_allclose(stored, _expected_moments(image, 16), atol=2e-3, rtol=1e-3)
    assert FakeAutoencoderKL.loaded_from == [(str(tmp_path / 'vae'), dict(local_files_only=True))]

    # interrupted after the first batch: the rerun encodes only the rest
    progress = json.loads((out / 'progress.json').read_text())
    (out / 'progress.json').write_text(json.dumps(dict(progress, done=4)))
    stored = np.load(out / 'moments.npy', mmap_mode='r+')
    stored[4:] = 0
    stored.flush()
    del stored
    encoded = []
    monkeypatch.setattr(FakeAutoencoderKL, 'encode', lambda self, x, encode=FakeAutoencoderKL.encode: (
        encoded.append(len(x)), encode(self, x))[1])
    tool.main(argv)
    assert encoded == [4]  # two images and their flips
    assert np.array_equal(np.load(out / 'moments.npy'), moments)
    with pytest.raises(SystemExit) as exit_info:
        tool.main([*argv[:-4], '--image-size', '32', '--device', 'cpu'])
    assert_report_matches(exit_info.value, 'other data')


def test_dataset_reads_complete_stores_and_draws_the_flip(tmp_path, monkeypatch):
    fake_diffusers.install(monkeypatch)
    (tmp_path / 'vae').mkdir()
    (tmp_path / 'vae' / 'config.json').write_text('{}')
    _image_folder(tmp_path / 'data')
    out = tmp_path / 'latents'
    tool = load_tool('extract_latents', 'generation')
    tool.main([str(tmp_path / 'data'), str(out), '--vae', str(tmp_path / 'vae'), '--image-size', '16',
               '--num-workers', '0', '--device', 'cpu'])
    moments = np.load(out / 'moments.npy')
    for flip_prob, which in ((0., 0), (1., 1)):
        item = LatentMomentsDataset(str(out), flip_prob=flip_prob)[4]
        assert np.array_equal(item['inputs'].numpy(), moments[4, which])
        assert item['data_samples'].gt_label.tolist() == [1] and item['data_samples'].sample_idx == 4
    dataset = LatentMomentsDataset(str(out))
    assert len(dataset) == 6
    assert {bool(dataset[0]['data_samples'].flip) for _ in range(40)} == {False, True}

    progress = json.loads((out / 'progress.json').read_text())
    (out / 'progress.json').write_text(json.dumps(dict(progress, done=3)))
    with pytest.raises(LatentStoreError, match='incomplete'):
        LatentMomentsDataset(str(out))
    with pytest.raises(LatentStoreError, match='extract_latents.py first'):
        LatentMomentsDataset(str(tmp_path / 'nowhere'))
