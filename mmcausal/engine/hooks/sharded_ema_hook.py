"""EMA of the weights for sharded (FSDP) training, where mmengine's ``EMAHook`` cannot copy the model."""
from typing import List, Optional, Sequence

import torch
from mmengine.hooks import Hook
from mmengine.runner import Runner
from torch import nn

from mmcausal.registry import HOOKS
from mmcausal.utils.validation import ConfigValueError

#: where each rank's checkpoint file holds its EMA shards: ``dict(steps=int, averages=[tensor, ...])``
CHECKPOINT_KEY = 'ema_shards'


def ema_parameters(model: nn.Module) -> List[nn.Parameter]:
    """The parameters :class:`ShardedEMAHook` averages, in its order: the trainable ones (under FSDP, this rank's
    shards of them)."""
    return [param for param in model.parameters() if param.requires_grad]


def copy_shards(targets: Sequence[torch.Tensor], values: Sequence[torch.Tensor]) -> None:
    """Copy saved EMA shards ``values`` into ``targets``, or raise :class:`ConfigValueError` if they belong to
    another model or world size."""
    if len(values) != len(targets) or any(value.shape != target.shape for value, target in zip(values, targets)):
        raise ConfigValueError('The checkpoint holds EMA shards of another model or world size; use the config and the '
                               'number of processes that saved it.')
    with torch.no_grad():
        for target, value in zip(targets, values):
            target.copy_(value)


@HOOKS.register_module()
class ShardedEMAHook(Hook):
    """Exponential moving average of the parameters, kept by each rank for the parameter shards it holds.

    mmengine's (and mmpretrain's) ``EMAHook`` deep-copies the model, which fails for an FSDP-wrapped one
    (``TypeError: cannot pickle 'module' object``). Under ``FSDPStrategy`` (``use_orig_params=True``, mmengine's
    default) ``runner.model.parameters()`` are this rank's shards, and an EMA is element-wise, so every rank
    averages its shards: ``ema += momentum * (param - ema)`` every ``interval`` training iterations, the first
    one copying, as ``ExponentialMovingAverage`` (buffers are not averaged). Validation and testing run on the
    EMA weights, as mmpretrain's ``EMAHook`` does by default. Each rank's checkpoint file carries its EMA shards
    (``'ema_shards'``), so a resumed run continues the average exactly, ``tools/test.py`` with the same
    sharded config and world size evaluates it and ``tools/model_converters/consolidate_sharded_checkpoint.py``
    writes it as one regular checkpoint (``--no-ema``: the trained weights instead). A loaded checkpoint without EMA
    shards is evaluated on its own weights. Needs ``state_dict_cfg='local'`` (per-rank checkpoints).

    Args:
        momentum: weight of the current parameters in each update.
        interval: update every ``interval`` training iterations.
    """
    priority = 'NORMAL'

    def __init__(self, momentum: float = 0.0002, interval: int = 1) -> None:
        if not 0. < momentum < 1.:
            raise ConfigValueError(f'ShardedEMAHook: momentum must be in (0, 1), got {momentum}.')
        if interval < 1:
            raise ConfigValueError(f'ShardedEMAHook: interval must be >= 1, got {interval}.')
        self.momentum = momentum
        self.interval = interval
        self.steps = 0
        self.params: List[torch.Tensor] = []
        self.averages: List[torch.Tensor] = []
        self._loaded: Optional[dict] = None
        self._averages_stale = False  # a checkpoint without EMA shards was loaded: the average is its weights

    def before_run(self, runner: Runner) -> None:
        strategy = getattr(runner, 'strategy', None)
        if getattr(strategy, '_is_full_state_dict', lambda: False)():
            raise ConfigValueError("ShardedEMAHook saves each rank's EMA shards in its own checkpoint file; set "
                                   "strategy.state_dict_cfg='local' (FSDPStrategy's default).")
        self.params = ema_parameters(runner.model)
        self.averages = [param.detach().clone() for param in self.params]
        self._restore()

    def after_train_iter(self, runner: Runner, batch_idx: int, data_batch: Optional[dict] = None,
                         outputs: Optional[dict] = None) -> None:
        self._averages_stale = False  # the first step copies the weights anyway
        with torch.no_grad():
            for average, param in zip(self.averages, self.params):
                if self.steps == 0:
                    average.copy_(param)
                elif self.steps % self.interval == 0:
                    average.lerp_(param, self.momentum)
        self.steps += 1

    def _swap(self) -> None:
        """Exchange the model's parameter shards with the EMA ones (which are the model's own after a load of a
        checkpoint without EMA shards, as mmengine's ``EMAHook`` takes such a checkpoint's weights)."""
        with torch.no_grad():
            if self._averages_stale:
                for average, param in zip(self.averages, self.params):
                    average.copy_(param)
                self._averages_stale = False
            for average, param in zip(self.averages, self.params):
                current = param.detach().clone()
                param.copy_(average)
                average.copy_(current)

    def before_val_epoch(self, runner: Runner) -> None:
        self._swap()

    def after_val_epoch(self, runner: Runner, metrics: Optional[dict] = None) -> None:
        self._swap()

    def before_test_epoch(self, runner: Runner) -> None:
        self._swap()

    def after_test_epoch(self, runner: Runner, metrics: Optional[dict] = None) -> None:
        self._swap()

    def before_save_checkpoint(self, runner: Runner, checkpoint: dict) -> None:
        checkpoint[CHECKPOINT_KEY] = dict(steps=self.steps, averages=self.averages)

    def after_load_checkpoint(self, runner: Runner, checkpoint: dict) -> None:
        """Take the EMA shards of a resumed or loaded checkpoint (applied now, or in :meth:`before_run`: mmengine's
        ``Runner`` loads checkpoints after ``before_run``, its ``FlexibleRunner`` before)."""
        self._loaded = checkpoint.get(CHECKPOINT_KEY)
        if self._loaded is None:  # the weights are loaded after this hook: averaged from them at first use
            self.steps, self._averages_stale = 0, True
        elif self.averages:
            self._restore()

    def _restore(self) -> None:
        if self._loaded is None:
            return
        copy_shards(self.averages, self._loaded['averages'])
        self.steps = self._loaded['steps']
        self._loaded = None
