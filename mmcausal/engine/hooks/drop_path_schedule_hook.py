"""De-focus's scheduled drop path (the released ``main.py``): stochastic depth rising every epoch."""
from typing import Optional

from mmengine.hooks import Hook
from mmengine.runner import Runner

from mmcausal.registry import HOOKS
from mmcausal.utils.validation import ConfigValueError
from .backbone_access import runner_backbone


def drop_path_rate_at(epoch: int, max_epochs: int, start: float, end: float) -> float:
    """``start + epoch / (max_epochs - 1) * (end - start)``: linear per epoch, ``end`` in the last epoch."""
    if max_epochs <= 1:
        return end
    return start + min(epoch, max_epochs - 1) / (max_epochs - 1) * (end - start)


@HOOKS.register_module()
class DropPathScheduleHook(Hook):
    """Set ``model.backbone.drop_path_rate`` (the last block's rate; block ``i`` of ``L`` gets ``i / (L - 1)`` of
    it) before every training iteration from ``runner.epoch``.

    The rate is a pure function of the epoch, so a resumed run continues the schedule exactly. The official
    De-focus recipes: base 0.1 -> 0.75 over 300 epochs, the large 1k fine-tune 0.1 -> 0.7 over 20.

    Args:
        start: rate in the first epoch.
        end: rate in the last epoch (``train_cfg.max_epochs``).
    """
    priority = 'NORMAL'

    def __init__(self, start: float = .1, end: float = .75) -> None:
        for name, rate in (('start', start), ('end', end)):
            if not 0. <= rate < 1.:
                raise ConfigValueError(f'DropPathScheduleHook: {name} must be in [0, 1), got {rate}.')
        self.start = start
        self.end = end

    def rate_at(self, epoch: int, max_epochs: int) -> float:
        """The rate this hook sets during training epoch ``epoch`` (``tools/analysis_tools/plot_schedules.py`` plots
        it without training)."""
        return drop_path_rate_at(epoch, max_epochs, self.start, self.end)

    def before_train_iter(self, runner: Runner, batch_idx: int, data_batch: Optional[dict] = None) -> None:
        rate = self.rate_at(runner.epoch, runner.max_epochs)
        runner_backbone(runner, 'drop_path_rate', 'DropPathScheduleHook').drop_path_rate = rate
        runner.message_hub.update_scalar('train/drop_path_rate', rate)
