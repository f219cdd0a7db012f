"""tools/generation/sample.py: N samples as PNGs and the ADM npz, balanced or uniformly random labels
(the official sample_ddp.py rule), the same files whatever the batch size or the number of processes, resumable, the
config's sampling preset overridable; or one labelled grid, a row per class."""

import sys

import numpy as np
import pytest
import torch
from mmpretrain.structures import DataSample
from PIL import Image

from analysis_utils import load_tool
from mmcausal.analysis.inputs import build_model
from mmcausal.apis.generation import balanced_labels, png_path, sample_labels, sample_to_folder
from mmcausal.registry import MODELS
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.errors import UserInputError
from zygote import run_python

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
    assert sample_labels(7, 3, 'balanced', seed=4).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_random_labels_are_uniform_and_a_function_of_the_seed_and_the_index_only():
    labels = sample_labels(100_000, 10, 'random', seed=3)
    assert labels.dtype == np.int64 and labels.min() == 0 and labels.max() == 9
    counts = np.bincount(labels, minlength=10)
    assert np.abs(counts - 10_000).max() < 400  # 4 standard deviations of a uniform draw
    assert np.ptp(counts) > 20  # not balanced
    assert np.array_equal(sample_labels(100_000, 10, 'random', seed=3), labels)
    for size in (1, 7, 1000):  # label i does not depend on how many samples there are
        assert np.array_equal(sample_labels(size, 10, 'random', seed=3), labels[:size])
    assert (sample_labels(1000, 10, 'random', seed=4) != labels[:1000]).mean() > 0.8
    with pytest.raises(UserInputError, match="label rule 'uniform'"):
        sample_labels(7, 3, 'uniform')


def test_sample_writes_pngs_and_the_adm_npz_independent_of_batch_size(trained, tmp_path):
    images, labels = _run(trained, tmp_path / 'b4', '--batch-size', '4')
    assert images.shape == (7, 8, 8, 3) and images.dtype == np.uint8
    assert labels.tolist() == balanced_labels(7, 3).tolist()  # the default of a test_cfg without label_rule
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
    labels = balanced_labels(7, 3)
    written = [sample_to_folder(model, str(out), labels, batch_size=2, rank=rank, world_size=2) for rank in (0, 1)]
    assert written == [[0, 2, 4, 6], [1, 3, 5]]
    png_path(str(out), 3).unlink()  # interrupted before sample 3 was written
    images, _ = _run(trained, out)
    assert np.abs(images.astype(int) - whole).max() <= 1
    assert sample_to_folder(model, str(out), labels) == []  # nothing left to do


def test_random_labels_and_their_samples_do_not_depend_on_batch_size_or_processes(trained, tmp_path):
    """``--label-rule random`` (the ImageNet presets' rule): sample i's label is draw i of the seed's label stream
    and its image is the model's sample for that label, with one process and any batch size or with two."""
    images, labels = _run(trained, tmp_path / 'b4', '--batch-size', '4', '--label-rule', 'random')
    assert labels.tolist() == sample_labels(7, 3, 'random', seed=5).tolist() != balanced_labels(7, 3).tolist()
    images_b1, labels_b1 = _run(trained, tmp_path / 'b1', '--batch-size', '1', '--label-rule', 'random')
    assert labels_b1.tolist() == labels.tolist() and np.abs(images_b1.astype(int) - images).max() <= 1
    cfg = read_config(str(trained / 'config.py'))
    cfg.merge_from_dict({'model.test_cfg.label_rule': 'random'})
    model = build_model(cfg, str(trained / 'iter_1.pth'))
    for rank in (0, 1):
        sample_to_folder(model, str(tmp_path / 'two'), labels, batch_size=3, rank=rank, world_size=2)
    for index in range(7):
        two = np.asarray(Image.open(png_path(str(tmp_path / 'two'), index)))
        assert np.abs(two.astype(int) - images[index]).max() <= 1
        (sample, ) = model.eval().predict(None, [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(
            int(labels[index]))])
        assert np.abs(sample.pred_img.permute(1, 2, 0).numpy().astype(int) - images[index]).max() <= 1
    _, other_seed = _run(trained, tmp_path / 'seed', '--label-rule', 'random', '--seed', '6')
    assert other_seed.tolist() == sample_labels(7, 3, 'random', seed=6).tolist() != labels.tolist()


def test_cfg_channels_must_be_an_int_or_all(trained, tmp_path):
    with pytest.raises(SystemExit, match="--cfg-channels must be an int or 'all'"):
        _run(trained, tmp_path, '--cfg-channels', 'three')
    with pytest.raises(SystemExit, match='--vae-decoder sets an SDVAE folder'):
        _run(trained, tmp_path, '--vae-decoder', str(tmp_path))


def _grid(trained, out, *options, classes=None):
    config = trained / 'config.py'
    if classes is not None:  # the training set names its classes, as the shapes twins' configs do
        config = out.parent / 'named.py'
        dataset = dict(type='ImageNet', metainfo=dict(classes=classes))
        config.write_text((trained / 'config.py').read_text() + f'train_dataloader = dict(dataset={dataset!r})\n')
    load_tool('sample', 'generation').main([str(config), str(trained / 'iter_1.pth'), '--grid', '--out', str(out),
                                            *options])
    return np.asarray(Image.open(out))


def test_grid_rows_are_the_samples_of_their_label_named_on_the_left(trained, tmp_path):
    grid = _grid(trained, tmp_path / 'grid.png', '--labels', '2', '0', '--samples-per-label', '3',
                 classes=('circle', 'cross', 'square'))
    cell = 8 + 2  # 8 px samples, 2 px apart
    margin = grid.shape[1] - (2 + 3 * cell)
    assert grid.shape == (2 + 2 * cell, margin + 2 + 3 * cell, 3) and margin > 10
    model = build_model(read_config(str(trained / 'config.py')), str(trained / 'iter_1.pth')).eval()
    for row, label in enumerate((2, 0)):
        for column in range(3):
            index = row * 3 + column  # noise from seed + index, as SampleGridHook draws it
            (sample, ) = model.predict(None, [DataSample(metainfo=dict(sample_idx=index)).set_gt_label(label)])
            top, left = 2 + row * cell, margin + 2 + column * cell
            assert np.array_equal(grid[top:top + 8, left:left + 8], sample.pred_img.permute(1, 2, 0).numpy())
    names = [grid[2 + row * cell:(row + 1) * cell, :margin] for row in range(2)]
    assert all((name.min(axis=2) < 100).sum() > 10 for name in names)  # dark text on white, in each row
    assert not np.array_equal(*names)  # '2 square' and '0 circle'
    unnamed = _grid(trained, tmp_path / 'unnamed.png', '--labels', '2', '0', '--samples-per-label', '3')
    assert unnamed.shape[1] < grid.shape[1]  # the label alone where the config names no class
    np.testing.assert_array_equal(unnamed[:, -(2 + 3 * cell):], grid[:, -(2 + 3 * cell):])
    assert _grid(trained, tmp_path / 'default.png').shape[0] == 2 + 3 * cell  # every class (up to 8) by default


@pytest.mark.parametrize('options,message', [
    (['--grid', '--out', 'folder'], 'give --out a .png file name'),
    (['--grid', '--out', 'grid.png', '--labels', '1', '3'], r'--labels must be classes 0 to 2 of this model, got \[3'),
    (['--grid', '--out', 'grid.png', '--samples-per-label', '0'], '--samples-per-label must be >= 1'),
    (['--num-samples', '2', '--out', 'folder', '--labels', '1'], '--labels sets the rows of a grid'),
    (['--grid', '--out', 'grid.png', '--label-rule', 'random'], '--label-rule sets the labels of --num-samples'),
])
def test_grid_options_that_cannot_work_end_in_one_line(trained, tmp_path, options, message):
    options = [str(tmp_path / option) if option in ('folder', 'grid.png') else option for option in options]
    with pytest.raises(SystemExit, match=message):
        load_tool('sample', 'generation').main([str(trained / 'config.py'), str(trained / 'iter_1.pth'), *options])


@pytest.mark.e2e
def test_torchrun_processes_write_the_single_process_samples(trained, tmp_path):
    """Two real gloo processes (torchrun) share the samples of a folder; it equals one process's."""
    single, labels = _run(trained, tmp_path / 'one', '--batch-size', '3')
    out = tmp_path / 'two'
    result = run_python([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc-per-node', '2',
                         'tools/generation/sample.py', str(trained / 'config.py'), str(trained / 'iter_1.pth'),
                         '--num-samples', '7', '--out', str(out), '--batch-size', '2'], timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert '[rank 1] 3 samples' in result.stdout + result.stderr  # rank 1 drew 1, 3, 5
    with np.load(out / 'samples.npz') as arrays:
        assert np.abs(arrays['arr_0'].astype(int) - single).max() <= 1
        assert arrays['arr_1'].tolist() == labels.tolist()
