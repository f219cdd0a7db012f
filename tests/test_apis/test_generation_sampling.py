"""tools/generation/sample.py (issue 31 §4): N samples as PNGs and the ADM npz, balanced labels, the same files
whatever the batch size or the number of processes, resumable, the config's sampling preset overridable."""

import numpy as np
import pytest
import torch
from PIL import Image

from analysis_utils import load_tool
from mmcausal.analysis.inputs import build_model
from mmcausal.apis.generation import balanced_labels, png_path, sample_to_folder
from mmcausal.registry import MODELS
from mmcausal.utils.cli import read_config

pytestmark = pytest.mark.usefixtures('single_thread')

MODEL = dict(type='ClassConditionalDiffusion',
             network=dict(type='DiffusionTransformer', arch=dict(embed_dims=32, num_layers=2, num_heads=2),
                          patch_size=2, in_channels=3, input_size=8, num_classes=3),
             objective=dict(type='GaussianDiffusion'),
             test_cfg=dict(sampler='ddim', num_steps=3, cfg_scale=2., seed=5))


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """A config file and a checkpoint of a random (non-zero) network."""
    folder = tmp_path_factory.mktemp('generator')
    torch.manual_seed(0)
    model = MODELS.build(MODEL)
    with torch.no_grad():
        for param in model.network.parameters():
            param.normal_(0, 0.2)
    torch.save(dict(state_dict=model.state_dict(), meta=dict()), folder / 'iter_1.pth')
    (folder / 'config.py').write_text(f"custom_imports = dict(imports=['mmcausal'])\nmodel = {MODEL!r}\n")
    return folder


def _run(trained, out, *options):
    tool = load_tool('sample', 'generation')
    tool.main([str(trained / 'config.py'), str(trained / 'iter_1.pth'), '--num-samples', '7', '--out', str(out),
               *options])
    with np.load(out / 'samples.npz') as arrays:
        return arrays['arr_0'], arrays['arr_1']


def test_balanced_labels():
    assert balanced_labels(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert np.ptp(np.bincount(balanced_labels(1000, 7))) <= 1


def test_sample_writes_pngs_and_the_adm_npz_independent_of_batch_size(trained, tmp_path):
    images, labels = _run(trained, tmp_path / 'b4', '--batch-size', '4')
    assert images.shape == (7, 8, 8, 3) and images.dtype == np.uint8
    assert labels.tolist() == balanced_labels(7, 3).tolist()
    assert np.array_equal(np.asarray(Image.open(png_path(str(tmp_path / 'b4'), 6))), images[6])
    images_b1, _ = _run(trained, tmp_path / 'b1', '--batch-size', '1')
    assert np.abs(images_b1.astype(int) - images).max() <= 1  # batched float reductions
    other_seed, _ = _run(trained, tmp_path / 'seed', '--seed', '6')
    unguided, _ = _run(trained, tmp_path / 'unguided', '--cfg-scale', '1')
    assert np.abs(other_seed.astype(int) - images).mean() > 5 and np.abs(unguided.astype(int) - images).mean() > 5


def test_processes_share_the_samples_and_a_rerun_finishes_a_partial_folder(trained, tmp_path):
    whole, _ = _run(trained, tmp_path / 'one', '--batch-size', '3')
    model = build_model(read_config(str(trained / 'config.py')), str(trained / 'iter_1.pth'))
    out = tmp_path / 'two'
    written = [sample_to_folder(model, str(out), 7, 3, batch_size=2, rank=rank, world_size=2) for rank in (0, 1)]
    assert written == [[0, 2, 4, 6], [1, 3, 5]]
    png_path(str(out), 3).unlink()  # interrupted before sample 3 was written
    images, _ = _run(trained, out)
    assert np.abs(images.astype(int) - whole).max() <= 1
    assert sample_to_folder(model, str(out), 7, 3) == []  # nothing left to do


def test_cfg_channels_must_be_an_int_or_all(trained, tmp_path):
    with pytest.raises(SystemExit, match="--cfg-channels must be an int or 'all'"):
        _run(trained, tmp_path, '--cfg-channels', 'three')
    with pytest.raises(SystemExit, match='--vae-decoder sets an SDVAE folder'):
        _run(trained, tmp_path, '--vae-decoder', str(tmp_path))
