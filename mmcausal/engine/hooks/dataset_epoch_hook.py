"""Tells an iterable training dataset which epoch starts, as ``DistSamplerSeedHook`` tells a sampler."""
from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmcausal.registry import HOOKS


@HOOKS.register_module()
class DatasetEpochHook(Hook):
    """Before each training epoch, call ``set_epoch(runner.epoch)`` on the training dataset if it has one.

    An iterable dataset (``WebDatasetImageText``) takes no sampler, so mmengine's loops never pass it the epoch: its
    shard and sample order then counts its own passes, which restart from 0 on resuming. With this hook epoch ``e``
    reads the order of epoch ``e`` in a resumed run too.
    """

    priority = 'NORMAL'

    def before_train_epoch(self, runner: Runner) -> None:
        dataset = runner.train_dataloader.dataset
        if hasattr(dataset, 'set_epoch'):
            dataset.set_epoch(runner.epoch)
