"""Build the Runner of a tool after every input check, and run the tool's action on it.

``tools/train.py``, ``tools/test.py`` and ``tools/analysis_tools/eval_resolutions.py`` go through :func:`run`, so
a bad config, data set or checkpoint ends each of them with one line, before anything is written that a later
``--resume`` would read.
"""
import contextlib
from typing import Any, Callable, Iterator, Sequence, Tuple

from mmengine.config import Config
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from mmcausal.engine.hooks import EmptyDetectionsHook
from mmcausal.utils.checkpoint_coverage import evaluation_loads, partial_loads_allowed
from mmcausal.utils.config_check import (
    check_config_values,
    check_loops,
    check_pretrained_paths,
    check_sharded_load_from,
    check_work_dir,
)
from mmcausal.utils.dataset_check import check_built_datasets, check_dataset_files, check_dataset_paths
from mmcausal.utils.error_report import user_errors_end_in_one_line

#: The Runner loop (and its config key) that owns each dataloader.
LOOPS = dict(train_dataloader=('train_loop', 'train_cfg'), val_dataloader=('val_loop', 'val_cfg'),
             test_dataloader=('test_loop', 'test_cfg'))


def built_datasets(runner: Runner, cfg: Config, dataloaders: Sequence[str]) -> Iterator[Tuple[str, Any]]:
    """``(dataloader name, dataset)`` of each of ``dataloaders``, built through the Runner's loops (which keep
    them, so ``runner.train()`` / ``runner.test()`` reuse them instead of building them again)."""
    for name in dataloaders:
        loop, loop_cfg = LOOPS.get(name, (None, None))
        if loop is not None and cfg.get(name) and cfg.get(loop_cfg):
            yield name, getattr(runner, loop).dataloader.dataset


def run(cfg: Config, dataloaders: Sequence[str], action: Callable[[Runner], object],
        check_pretrained: bool = True, evaluating: bool = False, loops: Sequence[str] = ()) -> None:
    """Check the work dir, the settings, the datasets (and, for training, the ``Pretrained`` / ``load_from``
    files), build the Runner (the ``runner_type`` the config names, e.g. the sharded configs' ``FlexibleRunner``)
    and its datasets, check them, and call ``action(runner)``; user-input errors end the program with one line
    (:func:`~mmcausal.utils.error_report.user_errors_end_in_one_line`). A checkpoint that loads less than half of a
    module is refused unless the config says ``allow_partial_load=True`` (``--allow-partial-load``); with ``evaluating``
    (the tools that only evaluate), so is one that loads none of a part that inference runs. All checks run before
    training, so a bad input found by them leaves nothing in the work dir that a later ``--resume`` would read.
    ``loops``: the Runner loops ``action`` runs (``'train'``, ``'test'``), which the config must give all their parts.
    """
    with user_errors_end_in_one_line(), partial_loads_allowed(bool(cfg.get('allow_partial_load', False))), \
            evaluation_loads() if evaluating else contextlib.nullcontext():
        check_work_dir(cfg.work_dir)
        check_loops(cfg, loops)
        check_config_values(cfg, dataloaders)
        check_dataset_paths(cfg, dataloaders)
        check_dataset_files(cfg, dataloaders)
        if check_pretrained:
            check_pretrained_paths(cfg)
        check_sharded_load_from(cfg)
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        check_built_datasets(list(built_datasets(runner, cfg, dataloaders)))
        runner.register_hook(EmptyDetectionsHook())  # a detector that predicts nothing says so
        action(runner)
