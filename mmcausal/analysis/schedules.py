"""A config's training schedules, computed without training: the learning rate of its ``param_scheduler``, the
soft-mask rate ``alpha`` of :class:`~mmcausal.engine.SoftMaskHook` (iLLaMA Sec. 3.6) and the drop-path rate of
:class:`~mmcausal.engine.DropPathScheduleHook` (De-focus Sec. 4.2), at every training iteration.

* The param schedulers are built on a dummy optimizer of the config's type and lr (``optim_wrapper.optimizer``)
  and stepped as mmengine's ``ParamSchedulerHook`` steps them: iteration-based ones (also the
  ``convert_to_iter_based`` ones) after every iteration, epoch-based ones after every epoch. The value at iteration
  ``i`` is the one that iteration trains with (what the log shows as ``lr``). It is the optimizer's base lr:
  parameter groups scale it by their ``lr_mult`` or layer decay, and ``auto_scale_lr`` is not applied (mmengine only
  applies it when enabled).
* The hooks are built from ``custom_hooks`` and asked through their own ``rate_at``, the function they train with.

Epoch-based loops need the iterations per epoch (``len(train_dataloader)``, what the hooks and the converted
schedulers use): given, or counted from the config's train dataloader in one process when its dataset exists.
"""
import copy
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np
import torch
from mmengine.config import Config
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIMIZERS, PARAM_SCHEDULERS, init_default_scope
from mmengine.runner import Runner

from mmcausal.engine import DropPathScheduleHook, SoftMaskHook
from mmcausal.registry import HOOKS
from mmcausal.utils.dataset_check import DatasetNotFoundError, check_dataset_paths
from .errors import AnalysisError
from .plotting import new_figure, save_figure, write_csv

CURVES = {'lr': 'learning rate', 'soft_mask_rate': 'soft-mask rate α (SoftMaskHook)',
          'drop_path_rate': 'drop-path rate, last block (DropPathScheduleHook)'}


@dataclass
class Schedules:
    """Per-iteration curves ``(max_iters,)`` keyed as :data:`CURVES` (only the hooks the config has)."""
    curves: Dict[str, np.ndarray]
    iters_per_epoch: Optional[int]

    @property
    def iterations(self) -> np.ndarray:
        return np.arange(len(self.curves['lr']))


def training_length(cfg: Config) -> Tuple[bool, int]:
    """``(epoch-based loop?, max_epochs or max_iters)`` of ``cfg.train_cfg``."""
    train_cfg = cfg.get('train_cfg') or {}
    for key, by_epoch in (('max_epochs', True), ('max_iters', False)):
        if key in train_cfg:
            return by_epoch, int(train_cfg[key])
    raise AnalysisError('train_cfg has neither max_epochs nor max_iters: the config does not say how long it trains.')


def count_iters_per_epoch(cfg: Config) -> int:
    """``len(train_dataloader)`` in one process (its dataset must exist)."""
    try:
        check_dataset_paths(cfg, ('train_dataloader', ))
    except DatasetNotFoundError as error:
        raise AnalysisError(f'The iterations per epoch are the batches of the train dataloader, whose dataset is '
                            f'missing ({error}) Or pass --iters-per-epoch N: ceil(training images / batch size) per '
                            'process (floor with drop_last).') from None  # this message, not the inner one
    loader = copy.deepcopy(cfg.train_dataloader.to_dict())
    loader.update(num_workers=0, persistent_workers=False)
    return len(Runner.build_dataloader(loader, seed=0))


def lr_curve(cfg: Config, max_iters: int, iters_per_epoch: Optional[int], max_epochs: int) -> np.ndarray:
    """The base lr at every iteration (module docstring). A scheduler without ``end`` ends, as the Runner sets it,
    at ``max_epochs`` if it is epoch-based (``by_epoch``, the default) and at ``max_iters`` if not (``max_epochs``
    is 1 for an iteration-based loop, as mmengine's ``IterBasedTrainLoop`` reports)."""
    optimizer_cfg = (cfg.get('optim_wrapper') or {}).get('optimizer')
    if optimizer_cfg is None:
        raise AnalysisError('The config has no optim_wrapper.optimizer to take the lr from.')
    optimizer = OPTIMIZERS.build(dict(copy.deepcopy(optimizer_cfg), params=[torch.nn.Parameter(torch.zeros(1))]))
    wrapper = OptimWrapper(optimizer)
    scheduler_cfgs = cfg.get('param_scheduler') or []
    scheduler_cfgs = [scheduler_cfgs] if isinstance(scheduler_cfgs, dict) else scheduler_cfgs
    schedulers = []
    for scheduler_cfg in scheduler_cfgs:
        scheduler_cfg = copy.deepcopy(dict(scheduler_cfg))
        scheduler_cfg.setdefault('end', max_epochs if scheduler_cfg.get('by_epoch', True) else max_iters)
        if scheduler_cfg.get('convert_to_iter_based') and iters_per_epoch is None:
            raise AnalysisError(f'{scheduler_cfg["type"]} converts epochs to iterations; pass --iters-per-epoch.')
        schedulers.append(PARAM_SCHEDULERS.build(scheduler_cfg, default_args=dict(optimizer=wrapper,
                                                                                  epoch_length=iters_per_epoch)))
    values = np.empty(max_iters)
    for iteration in range(max_iters):
        values[iteration] = optimizer.param_groups[0]['lr']
        wrapper.step()  # a no-op (no gradients), in the training order the schedulers check
        epoch_ends = iters_per_epoch is not None and (iteration + 1) % iters_per_epoch == 0
        for scheduler in schedulers:
            if not scheduler.by_epoch or epoch_ends:
                scheduler.step()
    return values


def schedule_hooks(cfg: Config) -> Dict[str, object]:
    """``{'soft_mask_rate': SoftMaskHook, 'drop_path_rate': DropPathScheduleHook}`` built from ``custom_hooks``
    (the ones present)."""
    hooks = {}
    for hook_cfg in cfg.get('custom_hooks') or []:
        hook_type = HOOKS.get(hook_cfg['type']) if isinstance(hook_cfg['type'], str) else hook_cfg['type']
        for key, schedule_type in (('soft_mask_rate', SoftMaskHook), ('drop_path_rate', DropPathScheduleHook)):
            if isinstance(hook_type, type) and issubclass(hook_type, schedule_type):
                hooks[key] = HOOKS.build(copy.deepcopy(dict(hook_cfg)))
    return hooks


def compute_schedules(cfg: Config, iters_per_epoch: Optional[int] = None) -> Schedules:
    """Every curve of ``cfg`` (module docstring); ``iters_per_epoch`` None: counted from the train dataloader where
    the loop or a hook needs it."""
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    by_epoch, length = training_length(cfg)
    hooks = schedule_hooks(cfg)
    soft_mask = hooks.get('soft_mask_rate')
    if iters_per_epoch is None and (by_epoch or (soft_mask is not None and soft_mask.by_epoch)):
        iters_per_epoch = count_iters_per_epoch(cfg)
    max_iters = length * iters_per_epoch if by_epoch else length
    curves = {'lr': lr_curve(cfg, max_iters, iters_per_epoch, length if by_epoch else 1)}
    iterations = range(max_iters)
    if soft_mask is not None:
        curves['soft_mask_rate'] = np.array([soft_mask.rate_at(i, iters_per_epoch) for i in iterations])
    if 'drop_path_rate' in hooks:
        # an iteration-based loop is one epoch long for the hook (mmengine's IterBasedTrainLoop: max_epochs 1)
        curves['drop_path_rate'] = np.array([hooks['drop_path_rate'].rate_at(i // iters_per_epoch, length)
                                             if by_epoch else hooks['drop_path_rate'].rate_at(0, 1)
                                             for i in iterations])
    return Schedules(curves, iters_per_epoch if by_epoch else None)


def write_schedules_csv(schedules: Schedules, path: str, max_rows: int = 5000) -> str:
    """``iteration, epoch, <curves>``: every iteration, or every k-th (and the last) beyond ``max_rows``."""
    iterations = schedules.iterations
    step = max(1, -(-len(iterations) // max_rows))
    picked = sorted({*iterations[::step].tolist(), int(iterations[-1])})
    ipe = schedules.iters_per_epoch
    rows = [[i, '' if ipe is None else i / ipe, *(float(curve[i]) for curve in schedules.curves.values())]
            for i in picked]
    return write_csv(path, ('iteration', 'epoch', *schedules.curves), rows)


def plot_schedules(schedules: Schedules, title: str, path: str) -> str:
    """One panel per curve against the iteration (epochs on the top axis of epoch-based loops)."""
    figure, axes = new_figure(len(schedules.curves), 1, (6.4, 1.9))
    ipe = schedules.iters_per_epoch
    for ax, (key, values) in zip(axes[:, 0], schedules.curves.items()):
        ax.plot(schedules.iterations, values, linewidth=1.2)
        ax.set_ylabel(key, fontsize=8)
        ax.set_title(CURVES[key], fontsize=8)
        ax.grid(alpha=.3)
        if ipe is not None:
            ax.secondary_xaxis('top', functions=(lambda i: i / ipe, lambda e: e * ipe)).tick_params(labelsize=7)
        ax.tick_params(labelsize=7)
    axes[-1, 0].set_xlabel('iteration' + ('' if ipe is None else f' ({ipe} per epoch; epochs on top)'), fontsize=8)
    figure.suptitle(title, fontsize=9)
    return save_figure(figure, path)
