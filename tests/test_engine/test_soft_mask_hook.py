"""SoftMaskHook: the schedule formula and what it sets during training and validation."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmcausal.engine import SoftMaskHook, soft_mask_rate_at
from mmcausal.models.illama import ILLaMA


@pytest.mark.parametrize('cutoff,start', [(10, 1.0), (7, 0.6)])
def test_linear_schedule_equals_official_linspace(cutoff, start):
    expected = np.concatenate([np.linspace(start, 0, cutoff), np.zeros(5)])
    got = [soft_mask_rate_at(i, cutoff, 'linear', start) for i in range(cutoff + 5)]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_constant_schedule_switches_to_causal_at_cutoff():
    got = [soft_mask_rate_at(i, 4, 'constant', 1.0) for i in range(6)]
    assert got == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


class _FakeRunner(SimpleNamespace):
    pass


def _runner(iteration: int, iters_per_epoch: int = 10):
    backbone = ILLaMA(arch=dict(embed_dims=16, num_layers=2, num_heads=2), img_size=32, mask_mode='official')
    scalars = {}
    return _FakeRunner(
        iter=iteration, train_dataloader=range(iters_per_epoch), model=torch.nn.Module(),
        message_hub=SimpleNamespace(update_scalar=scalars.__setitem__), scalars=scalars), backbone


def test_hook_sets_rate_from_iteration_in_epochs_and_zero_for_validation():
    runner, backbone = _runner(iteration=15)
    runner.model.backbone = backbone
    hook = SoftMaskHook(schedule='linear', cutoff=3, by_epoch=True, start=1.0)  # 30 iterations
    hook.before_train_iter(runner, batch_idx=5)
    assert backbone.soft_mask_rate == pytest.approx(1 - 15 / 29)
    assert runner.scalars['train/soft_mask_rate'] == pytest.approx(1 - 15 / 29)
    hook.before_val_epoch(runner)
    assert backbone.soft_mask_rate == 0.0


def test_hook_explains_models_without_soft_mask():
    runner, _ = _runner(iteration=0)
    runner.model.backbone = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match='soft_mask_rate'):
        SoftMaskHook().before_train_iter(runner, batch_idx=0)


def test_bad_hook_arguments_are_rejected():
    with pytest.raises(ValueError, match='schedule'):
        SoftMaskHook(schedule='cosine')
    with pytest.raises(ValueError, match='start'):
        SoftMaskHook(start=2.0)
