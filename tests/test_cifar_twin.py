"""The CIFAR transfer twin (``configs/illama/illama-nano-p4_1xb64-12e-soft-mask_shapes-cifar10-32px.py``) trains
through ``tools/train.py`` on the shapes data's CIFAR-10 copy, read by mmpretrain's CIFAR10 loader (without the
official checksums): the loss falls, the soft mask runs from bidirectional to causal, and the causal model's top-1
is far above chance (25 %; seeds 0 / 1 / 2 reach 81.5 / 78.5 / 83.0 %)."""
import json
import sys
from pathlib import Path

import pytest

from e2e_utils import loss_falls, run_command

CONFIG = 'configs/illama/illama-nano-p4_1xb64-12e-soft-mask_shapes-cifar10-32px.py'
BAR = 50.0  # top-1 %, twice chance


@pytest.mark.e2e
def test_cifar_twin_learns_the_shapes_through_the_cifar_loader(shapes_root, tmp_path):
    shapes = shapes_root  # its cifar10/ folder: the CIFAR-10 copy of the session's shapes draw (conftest)
    work_dir = tmp_path / 'work'
    run_command([sys.executable, 'tools/train.py', CONFIG, '--work-dir', str(work_dir), '--cfg-options',
                 *(f'{split}_dataloader.dataset.data_root={shapes}' for split in ('train', 'val', 'test'))])

    (scalars, ) = Path(work_dir).glob('*/vis_data/scalars.json')
    records = [json.loads(line) for line in scalars.read_text().splitlines()]
    losses = [r['loss'] for r in records if 'loss' in r]
    assert loss_falls(losses, fraction=0.8), f'loss did not fall: first {losses[:3]} ... last {losses[-3:]}'
    alphas = [r['soft_mask_rate'] for r in records if 'soft_mask_rate' in r]
    assert alphas[0] > 0.9 and alphas[-1] == 0.0
    (top1, ) = [r['accuracy/top1'] for r in records if 'accuracy/top1' in r]  # one validation, at the end
    print(f'{CONFIG}: accuracy/top1 = {top1}')
    assert top1 >= BAR, f'top-1 {top1} < {BAR}'
