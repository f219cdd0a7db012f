"""A grid of class-conditional samples from fixed noise and labels, written every k training iterations."""
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from mmengine.dist import is_main_process
from mmengine.hooks import Hook
from mmengine.runner import Runner
from PIL import Image
from torch import nn

from mmcausal.models.generation.sample_grid import labelled_grid, row_names, sample_grid
from mmcausal.registry import HOOKS
from mmcausal.utils.validation import ConfigValueError


@HOOKS.register_module()
class SampleGridHook(Hook):
    """Every ``interval`` iterations (and after the last one) sample ``samples_per_label`` images of each of ``labels``
    and write them as one grid, a row per label named on its left (with the training set's class name when its
    ``metainfo`` has one), to ``<work_dir>/sample_grids/iter_<n>.png``.

    The grid's samples are always the same (sample ``i`` of the grid takes the model's ``test_cfg`` seed + ``i``), so
    successive grids show how training changes the generator, not new noise. With ``use_ema`` the weights of the
    run's ``EMAHook`` / ``ShardedEMAHook`` are sampled (what checkpoints store), swapped in as for validation, else the
    live weights. Sampling uses its own generators and evaluation mode, so the training run is the same with or
    without this hook.

    Args:
        interval: iterations between grids.
        labels: the classes of the rows.
        samples_per_label: the columns.
        use_ema: sample the EMA weights when the run has an ``EMAHook``.
    """
    priority = 'LOW'  # after the EMA update of the iteration

    def __init__(self, interval: int = 10_000, labels: Sequence[int] = (0, 1, 2, 3), samples_per_label: int = 4,
                 use_ema: bool = True) -> None:
        if interval < 1 or samples_per_label < 1 or not labels:
            raise ConfigValueError(f'SampleGridHook needs interval >= 1, samples_per_label >= 1 and some labels, got '
                                   f'{interval}, {samples_per_label}, {list(labels)}.')
        self.interval, self.labels, self.samples_per_label, self.use_ema = interval, list(labels), samples_per_label, \
            use_ema
        self.class_names: Optional[Sequence[str]] = None

    def before_train(self, runner: Runner) -> None:
        dataset = getattr(runner.train_dataloader, 'dataset', None)
        self.class_names = (getattr(dataset, 'metainfo', None) or {}).get('classes')

    def after_train_iter(self, runner: Runner, batch_idx: int, data_batch: Optional[dict] = None,
                         outputs: Optional[dict] = None) -> None:
        if self.every_n_train_iters(runner, self.interval) or self.is_last_train_iter(runner):
            self.write_grid(runner)

    def grid(self, model: nn.Module) -> np.ndarray:
        """The labelled grid ``(H, W, 3)`` uint8 of the samples of ``model`` (a generative model, or its DDP / FSDP
        wrapper: :func:`~mmcausal.models.generation.sample_grid.sample_grid`)."""
        images = sample_grid(model, self.labels, self.samples_per_label)
        return labelled_grid(images, self.samples_per_label, row_names(self.labels, self.class_names))

    def write_grid(self, runner: Runner) -> Path:
        """Sample on every process (DDP and FSDP forwards are collective), with the EMA weights swapped in as for
        validation; the main process writes the PNG."""
        ema = next((hook for hook in runner.hooks if type(hook).__name__ in ('EMAHook', 'ShardedEMAHook')),
                   None) if self.use_ema else None
        if ema is not None:
            ema.before_val_epoch(runner)
        try:
            grid = self.grid(runner.model)
        finally:
            if ema is not None:
                ema.after_val_epoch(runner)
        path = Path(runner.work_dir) / 'sample_grids' / f'iter_{runner.iter + 1}.png'
        if is_main_process():
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(grid).save(path)
        return path


__all__ = ['SampleGridHook']
