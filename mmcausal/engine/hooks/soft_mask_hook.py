"""Soft-mask schedule of iLLaMA (paper Sec. 3.3, "soft mask"; released ``mask_scheduler.py``)."""
from typing import Optional

from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmcausal.registry import HOOKS
from mmcausal.utils.validation import ConfigValueError, check_choice
from .backbone_access import runner_backbone

SCHEDULES = ('linear', 'constant')


def soft_mask_rate_at(iteration: int, cutoff_iters: int, schedule: str, start: float) -> float:
    """``alpha`` at a training iteration.

    ``'constant'``: ``start`` for ``iteration < cutoff_iters``; ``'linear'``: ``start -> 0`` linearly over the
    first ``cutoff_iters`` iterations, reaching exactly 0 at ``cutoff_iters - 1`` (numpy ``linspace`` of the
    official code). Both are 0 from ``cutoff_iters`` on.
    """
    if iteration >= cutoff_iters:
        return 0.
    if schedule == 'constant' or cutoff_iters == 1:
        return start
    return start * (1. - iteration / (cutoff_iters - 1))


@HOOKS.register_module()
class SoftMaskHook(Hook):
    """Set ``model.backbone.soft_mask_rate`` before every training iteration from ``runner.iter``.

    Because the rate is a pure function of the iteration counter, a resumed run continues the schedule
    exactly. Validation and testing run with ``alpha = 0`` (the causal model, as at inference).

    Args:
        schedule: ``'linear'`` (start -> 0) or ``'constant'`` (start, then 0).
        cutoff: length of the soft phase, in epochs (``by_epoch=True``) or iterations.
        by_epoch: unit of ``cutoff``; epochs are converted with ``len(runner.train_dataloader)``.
        start: ``alpha_0`` (1 = bidirectional at the start, as in the paper).
    """
    priority = 'NORMAL'

    def __init__(self, schedule: str = 'linear', cutoff: int = 50, by_epoch: bool = True, start: float = 1.) -> None:
        check_choice('soft-mask schedule', schedule, SCHEDULES)
        if not 0. <= start <= 1.:
            raise ConfigValueError(f'SoftMaskHook: start must be in [0, 1], got {start}.')
        if cutoff < 0:
            raise ConfigValueError(f'SoftMaskHook: cutoff must be >= 0, got {cutoff}.')
        self.schedule = schedule
        self.cutoff = cutoff
        self.by_epoch = by_epoch
        self.start = start

    @staticmethod
    def _backbone(runner: Runner):
        return runner_backbone(runner, 'soft_mask_rate', 'SoftMaskHook (e.g. for ILLaMA)')

    def cutoff_iters(self, iters_per_epoch: int) -> int:
        """Length of the soft phase in iterations (``iters_per_epoch``: batches per training epoch)."""
        return self.cutoff * iters_per_epoch if self.by_epoch else self.cutoff

    def rate_at(self, iteration: int, iters_per_epoch: int) -> float:
        """``alpha`` this hook sets before training iteration ``iteration`` (``tools/analysis_tools/plot_schedules.py``
        plots it without training)."""
        return soft_mask_rate_at(iteration, self.cutoff_iters(iters_per_epoch), self.schedule, self.start)

    def before_train_iter(self, runner: Runner, batch_idx: int, data_batch: Optional[dict] = None) -> None:
        alpha = self.rate_at(runner.iter, len(runner.train_dataloader) if self.by_epoch else 1)
        self._backbone(runner).soft_mask_rate = alpha
        runner.message_hub.update_scalar('train/soft_mask_rate', alpha)

    def before_val_epoch(self, runner: Runner) -> None:
        self._backbone(runner).soft_mask_rate = 0.

    def before_test_epoch(self, runner: Runner) -> None:
        self._backbone(runner).soft_mask_rate = 0.
