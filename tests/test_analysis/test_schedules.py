"""mmcausal/analysis/schedules.py and tools/analysis_tools/plot_schedules.py: the curves computed from a config equal
what a real (tiny) training run sets and logs at every iteration."""
import csv

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.model import BaseModel
from mmengine.runner import Runner
from PIL import Image

from analysis_utils import ILLAMA_TWIN, load_tool
from mmcausal.analysis import compute_schedules

EPOCHS, ITERS_PER_EPOCH = 4, 3
SCHEDULE = dict(
    optim_wrapper=dict(optimizer=dict(type='AdamW', lr=0.1, weight_decay=0.)),
    param_scheduler=[
        dict(type='LinearLR', start_factor=0.1, by_epoch=True, end=1, convert_to_iter_based=True),
        dict(type='CosineAnnealingLR', eta_min=1e-3, by_epoch=True, begin=1, end=3, convert_to_iter_based=True),
        dict(type='MultiStepLR', milestones=[3], gamma=0.5, by_epoch=True),  # stepped once per epoch
    ],
    train_cfg=dict(by_epoch=True, max_epochs=EPOCHS),
    custom_hooks=[dict(type='SoftMaskHook', schedule='linear', cutoff=2, by_epoch=True, start=0.8),
                  dict(type='DropPathScheduleHook', start=0.1, end=0.4)])


class _Backbone(torch.nn.Module):
    """Has the two attributes the hooks drive."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(2, 1)
        self.soft_mask_rate, self.drop_path_rate = 0., 0.


class _ToyModel(BaseModel):

    def __init__(self) -> None:
        super().__init__()
        self.backbone = _Backbone()

    def forward(self, inputs, data_samples=None, mode='loss'):
        return dict(loss=self.backbone.linear(torch.stack(inputs)).square().mean())


def test_curves_equal_what_training_sets(tmp_path):
    runner = Runner(model=_ToyModel(), work_dir=str(tmp_path), default_scope='mmpretrain',
                    train_dataloader=dict(dataset=[dict(inputs=torch.ones(2))] * (2 * ITERS_PER_EPOCH), batch_size=2,
                                          sampler=dict(type='DefaultSampler', shuffle=False), num_workers=0),
                    default_hooks=dict(checkpoint=None, logger=dict(type='LoggerHook', interval=100)),
                    **SCHEDULE)
    runner.train()
    schedules = compute_schedules(Config(dict(SCHEDULE, default_scope='mmpretrain')), ITERS_PER_EPOCH)
    assert schedules.iters_per_epoch == ITERS_PER_EPOCH and len(schedules.iterations) == EPOCHS * ITERS_PER_EPOCH
    for key, logged in (('lr', 'train/lr'), ('soft_mask_rate', 'train/soft_mask_rate'),
                        ('drop_path_rate', 'train/drop_path_rate')):
        np.testing.assert_allclose(schedules.curves[key], runner.message_hub.get_scalar(logged).data[0], rtol=1e-12,
                                   err_msg=key)
    # the pieces are there: warm-up from 0.01, cosine towards 1e-3 over iterations 3..8, the halving after epoch 3
    lr = schedules.curves['lr']
    cosine_5 = 1e-3 + (0.1 - 1e-3) / 2 * (1 + np.cos(np.pi * 5 / 6))
    np.testing.assert_allclose(lr[[0, 2, 3, 8]], [0.01, 0.1, 0.1, cosine_5])
    assert lr[9] == pytest.approx(lr[8] / 2)
    np.testing.assert_allclose(schedules.curves['soft_mask_rate'][:7], [0.8, 0.64, 0.48, 0.32, 0.16, 0., 0.])
    np.testing.assert_allclose(schedules.curves['drop_path_rate'][::ITERS_PER_EPOCH], [0.1, 0.2, 0.3, 0.4])


def test_cli_counts_the_iterations_per_epoch_from_the_data(tmp_path):
    for name in ('circle', 'cross', 'square', 'triangle'):  # 40 training images: 2 batches of 32 per epoch
        (tmp_path / 'data' / 'train' / name).mkdir(parents=True)
        for index in range(10):
            Image.new('RGB', (8, 8)).save(tmp_path / 'data' / 'train' / name / f'{index}.png')
    load_tool('plot_schedules').main([ILLAMA_TWIN, '--out-dir', str(tmp_path / 'out'), '--cfg-options',
                                      f'train_dataloader.dataset.data_root={tmp_path / "data"}'])
    name = 'illama-nano-p8_1xb32-30e_shapes-64px_schedules'
    assert (tmp_path / 'out' / f'{name}.png').stat().st_size > 1000
    with open(tmp_path / 'out' / f'{name}.csv') as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 30 * 2 and list(rows[0]) == ['iteration', 'epoch', 'lr', 'soft_mask_rate']
    assert [float(row['soft_mask_rate']) for row in rows] == [1.] * 10 + [0.] * 50  # constant for 5 epochs
    assert float(rows[0]['lr']) == pytest.approx(2e-5) and float(rows[4]['lr']) == pytest.approx(2e-3)  # warm-up
    assert float(rows[3]['epoch']) == 1.5


def test_cli_asks_for_the_iterations_per_epoch_without_data(tmp_path):
    with pytest.raises(SystemExit, match=r'AnalysisError: .*dataset is missing.*Or pass --iters-per-epoch N'):
        load_tool('plot_schedules').main([ILLAMA_TWIN, '--out-dir', str(tmp_path), '--cfg-options',
                                          f'train_dataloader.dataset.data_root={tmp_path / "absent"}'])
