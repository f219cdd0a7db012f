"""tools/generation/fid_curve.py (VisionLLaMA Table 10: FID against training step) end to end on the checkpoints of a
tiny DiT-LLaMA-nano run trained here through mmengine (4 iterations, a checkpoint every 2), judged by an untrained
judge (the metrics' code path; the values mean nothing): the table, the plot and the per-step FIDs, which must be
those of tools/generation/evaluate.py on the same samples."""
import csv
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from e2e_utils import ROOT, load_config, train
from judge_utils import random_judge_checkpoint
from mmcausal.analysis import AnalysisError
from mmcausal.analysis.fid_curve import run_checkpoints, step_label
from mmcausal.evaluation import images_from_class_folders, save_sample_npz

pytestmark = pytest.mark.e2e

TWIN = 'dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py'
FID_CURVE = str(ROOT / 'tools/generation/fid_curve.py')
EVALUATE = str(ROOT / 'tools/generation/evaluate.py')


@pytest.fixture(scope='module')
def twin_run(shapes_root, tmp_path_factory) -> Path:
    """A work dir with iter_2.pth and iter_4.pth of the DiT-LLaMA-nano twin (random autoencoder, batch 8)."""
    work_dir = tmp_path_factory.mktemp('twin_run')
    cfg = load_config(TWIN, shapes_root, work_dir, **{
        'train_cfg.max_iters': 4, 'default_hooks.checkpoint.interval': 2, 'default_hooks.logger.interval': 1,
        'train_dataloader.batch_size': 8, 'train_dataloader.num_workers': 0,
        'train_dataloader.persistent_workers': False, 'model.autoencoder.checkpoint': None})
    train(cfg)
    return work_dir


def _tool(path: str):
    return runpy.run_path(path, run_name='tool')['main']


def test_fid_curve_tabulates_and_plots_every_checkpoint_of_a_run(twin_run, shapes_root, tmp_path, capsys):
    judge = random_judge_checkpoint(tmp_path / 'judge.pth')
    images, labels, _ = images_from_class_folders(str(shapes_root / 'imagenet' / 'val'), size=32)
    save_sample_npz(str(tmp_path / 'ref.npz'), images[::4], labels[::4])
    out = tmp_path / 'curve'
    _tool(FID_CURVE)([str(ROOT / 'configs' / TWIN), str(twin_run), '--ref', str(tmp_path / 'ref.npz'),
                      '--extractor', f'judge:{judge}', '--num-samples', '12', '--out', str(out), '--batch-size', '12',
                      '--kid-subset-size', '12', '--label', 'nano', '--cfg-options', 'model.test_cfg.num_steps=2'])
    with open(out / 'fid_curve.csv') as file:
        rows = list(csv.DictReader(file))
    assert [row['step'] for row in rows] == ['2', '4']
    assert [Path(row['checkpoint']).name for row in rows] == ['iter_2.pth', 'iter_4.pth']
    assert all(float(row['fd']) > 0 and 0 <= float(row['precision']) <= 1 for row in rows)
    table = (out / 'fid_curve.md').read_text().splitlines()
    assert table[0] == '| run | 2 | 4 |' and table[2].startswith('| nano | ')
    assert (out / 'fid_curve.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert '| run | 2 | 4 |' in capsys.readouterr().out
    # each step's numbers are evaluate.py's on that step's samples (written where sample.py would write them)
    samples = out / 'samples' / 'iter_4' / 'samples.npz'
    with np.load(samples) as data:
        assert data['arr_0'].shape == (12, 32, 32, 3) and data['arr_1'].shape == (12,)
    _tool(EVALUATE)([str(samples), '--ref', str(tmp_path / 'ref.npz'), '--extractor', f'judge:{judge}',
                     '--memorisation', 'none', '--kid-subset-size', '12', '--out-json', str(tmp_path / 'e.json')])
    expected = json.loads((tmp_path / 'e.json').read_text())
    saved = json.loads((out / 'fid_curve.json').read_text())[1]
    assert {key: saved[key] for key in expected} == pytest.approx(expected, rel=1e-6)


def test_run_checkpoints_sorts_the_steps_and_refuses_what_is_not_a_run(tmp_path):
    for step in (300, 20, 1000):
        (tmp_path / f'iter_{step}.pth').write_bytes(b'')
    assert [step for step, _ in run_checkpoints([str(tmp_path)])] == [20, 300, 1000]
    assert [step_label(step) for step in (20, 1000, 100_000, 1500)] == ['20', '1k', '100k', '1500']
    with pytest.raises(AnalysisError, match='holds no iter_<step>.pth'):
        run_checkpoints([str(tmp_path / 'empty')]) if (tmp_path / 'empty').mkdir() is None else None
    with pytest.raises(AnalysisError, match='does not exist'):
        run_checkpoints([str(tmp_path / 'iter_5.pth')])
