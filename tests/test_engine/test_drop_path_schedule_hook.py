"""De-focus's scheduled drop path: the released per-epoch linear rule, per-layer linspace, resumable."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from mmcausal.engine import DropPathScheduleHook, drop_path_rate_at
from mmcausal.models.defocus import DefocusMamba


@pytest.mark.parametrize('epochs,start,end', [(300, 0.1, 0.75), (20, 0.1, 0.7)])
def test_rate_is_the_official_per_epoch_linear_rule(epochs, start, end):
    official = [start + e / (epochs - 1) * (end - start) for e in range(epochs)]  # main.py train_one_epoch
    np.testing.assert_allclose([drop_path_rate_at(e, epochs, start, end) for e in range(epochs)], official)
    assert drop_path_rate_at(epochs - 1, epochs, start, end) == pytest.approx(end)


def _runner(epoch, max_epochs=300):
    backbone = DefocusMamba(dict(embed_dims=32, num_layers=24, dt_rank=4), img_size=32, patch_size=8)
    scalars = {}
    runner = SimpleNamespace(epoch=epoch, max_epochs=max_epochs, model=SimpleNamespace(backbone=backbone),
                             message_hub=SimpleNamespace(update_scalar=scalars.__setitem__), scalars=scalars)
    return runner, backbone


def test_hook_sets_every_layer_from_the_epoch_alone():
    runner, backbone = _runner(epoch=150)
    hook = DropPathScheduleHook(start=0.1, end=0.75)
    hook.before_train_iter(runner, batch_idx=7)
    rate = 0.1 + 150 / 299 * 0.65
    np.testing.assert_allclose([block.drop_path_rate for block in backbone.layers], np.linspace(0, rate, 24))
    assert runner.scalars['train/drop_path_rate'] == pytest.approx(rate)
    resumed, resumed_backbone = _runner(epoch=150)  # a resumed run at the same epoch: the same rates
    hook.before_train_iter(resumed, batch_idx=0)
    assert [b.drop_path_rate for b in resumed_backbone.layers] == [b.drop_path_rate for b in backbone.layers]


def test_hook_explains_models_without_drop_path_and_bad_rates():
    runner, _ = _runner(epoch=0)
    runner.model.backbone = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match='drop_path_rate'):
        DropPathScheduleHook().before_train_iter(runner, batch_idx=0)
    with pytest.raises(ValueError, match='end'):
        DropPathScheduleHook(end=1.0)
