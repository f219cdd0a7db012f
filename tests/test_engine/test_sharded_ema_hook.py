"""ShardedEMAHook under mmengine's plain Runner order (``before_run``, then the checkpoint load, whose weights reach
the model after ``after_load_checkpoint``): evaluation runs on the checkpoint's EMA shards, or on its weights where
it has none (as mmengine's EMAHook takes them), never on the weights the model started with."""
from types import SimpleNamespace

import torch
from torch import nn

from mmcausal.engine.hooks.sharded_ema_hook import CHECKPOINT_KEY, ShardedEMAHook


def _loaded_as_the_plain_runner_does(checkpoint: dict) -> nn.Linear:
    """The model after ``before_run``, the checkpoint load and ``before_test_epoch``."""
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    runner = SimpleNamespace(model=model)
    hook = ShardedEMAHook()
    hook.before_run(runner)
    hook.after_load_checkpoint(runner, checkpoint)
    with torch.no_grad():  # Runner.load_checkpoint puts the weights in after calling the hooks
        model.weight.fill_(1.)
        model.bias.fill_(1.)
    hook.before_test_epoch(runner)
    return model


def test_a_checkpoint_without_ema_shards_is_evaluated_on_its_weights():
    model = _loaded_as_the_plain_runner_does({'state_dict': {}})
    assert torch.equal(model.weight, torch.ones(1, 2)) and torch.equal(model.bias, torch.ones(1))


def test_a_checkpoint_with_ema_shards_is_evaluated_on_them():
    shards = dict(steps=5, averages=[torch.full((1, 2), 2.), torch.full((1, ), 3.)])
    model = _loaded_as_the_plain_runner_does({'state_dict': {}, CHECKPOINT_KEY: shards})
    assert torch.equal(model.weight, torch.full((1, 2), 2.)) and torch.equal(model.bias, torch.full((1, ), 3.))
