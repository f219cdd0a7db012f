"""A run interrupted at iteration k and resumed ends exactly like an uninterrupted run (weights, optimizer
schedule and soft-mask schedule)."""
import pytest
import torch
from mmengine.hooks import Hook
from mmengine.runner import Runner

from e2e_utils import load_config

pytestmark = pytest.mark.e2e

ITERS_PER_EPOCH = 13  # 400 training images / batch 32
INTERRUPT_AT = 2 * ITERS_PER_EPOCH


class Interrupted(Exception):
    pass


class InterruptAt(Hook):
    """Simulates a crash right before training iteration ``k``."""

    def __init__(self, k: int) -> None:
        self.k = k

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        if runner.iter == self.k:
            raise Interrupted


class RecordSoftMaskRate(Hook):
    priority = 'LOW'  # after SoftMaskHook (NORMAL) has set the rate

    def __init__(self) -> None:
        self.rates = {}

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.rates[runner.iter] = runner.model.backbone.soft_mask_rate


def _config(shapes_root, work_dir, resume=False):
    deterministic_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
    return load_config(
        'illama/illama-nano-p8_1xb32-30e_shapes-64px.py', shapes_root, work_dir,
        **{
            'train_cfg.max_epochs': 4,
            'train_cfg.val_interval': 100,
            'train_dataloader.dataset.pipeline': deterministic_pipeline,
            'train_dataloader.num_workers': 0,
            'train_dataloader.persistent_workers': False,
            'default_hooks.checkpoint.interval': 1,
            'default_hooks.checkpoint.max_keep_ckpts': -1,
            'param_scheduler.1.end': 4,
            'custom_hooks': [dict(type='SoftMaskHook', schedule='linear', cutoff=3, start=1.0)],
            'resume': resume,
        })


def _run(cfg, *hooks):
    runner = Runner.from_cfg(cfg)
    for hook in hooks:
        runner.register_hook(hook)
    runner.train()
    return runner


def test_interrupted_and_resumed_run_equals_uninterrupted_run(shapes_root, tmp_path):
    reference_rates = RecordSoftMaskRate()
    reference = _run(_config(shapes_root, tmp_path / 'reference'), reference_rates)

    with pytest.raises(Interrupted):
        _run(_config(shapes_root, tmp_path / 'resumed'), InterruptAt(INTERRUPT_AT))
    resumed_rates = RecordSoftMaskRate()
    resumed = _run(_config(shapes_root, tmp_path / 'resumed', resume=True), resumed_rates)

    assert min(resumed_rates.rates) == INTERRUPT_AT  # it continued, it did not start over
    assert resumed.iter == reference.iter == 4 * ITERS_PER_EPOCH
    for it, rate in resumed_rates.rates.items():
        assert rate == reference_rates.rates[it]
    assert 0 < reference_rates.rates[INTERRUPT_AT] < 1  # the interruption fell inside the soft phase
    reference_state = reference.model.state_dict()
    for name, value in resumed.model.state_dict().items():
        torch.testing.assert_close(value, reference_state[name], rtol=0, atol=0, msg=name)
