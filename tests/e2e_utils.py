"""Helpers for the end-to-end tests: load a repo config, point it at test data, run it (in process or through a
command-line tool), read what it logged."""
import os
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
from mmengine.config import Config, ConfigDict
from mmengine.hooks import Hook
from mmengine.runner import Runner

from zygote import run_python

ROOT = Path(__file__).resolve().parents[1]


def _redirect(node: Any, old: str, new: str) -> Any:
    if isinstance(node, (dict, ConfigDict)):
        return {k: _redirect(v, old, new) for k, v in node.items()}
    if isinstance(node, list):
        return [_redirect(v, old, new) for v in node]
    if isinstance(node, str) and node.startswith(old):
        return new + node[len(old):]
    return node


def load_config(relative_path: str, shapes_root: Path, work_dir: Path, **options: Any) -> Config:
    """Load ``configs/<relative_path>`` with ``data/shapes`` redirected to ``shapes_root`` and
    ``options`` merged (mmengine ``--cfg-options`` style keys)."""
    cfg = Config.fromfile(str(ROOT / 'configs' / relative_path))
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader', 'val_evaluator', 'test_evaluator'):
        if cfg.get(key) is not None:
            cfg[key] = _redirect(cfg[key].to_dict(), 'data/shapes', str(shapes_root))
    cfg.work_dir = str(work_dir)
    cfg.merge_from_dict(options)
    return cfg


class Interrupted(Exception):
    pass


class InterruptAt(Hook):
    """Simulates a crash right before training iteration ``k``."""

    def __init__(self, k: int) -> None:
        self.k = k

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        if runner.iter == self.k:
            raise Interrupted


def train(cfg: Config) -> Runner:
    runner = Runner.from_cfg(cfg)
    runner.train()
    return runner


def history(runner: Runner, key: str) -> List[float]:
    """Every value logged under ``key`` (e.g. ``'train/loss'``) during the run."""
    return [float(v) for v in runner.message_hub.get_scalar(key).data[0]]


def last_metrics(runner: Runner) -> Dict[str, float]:
    """The last validation metrics, keyed without the ``val/`` prefix."""
    return {k[len('val/'):]: float(v.current()) for k, v in runner.message_hub.log_scalars.items()
            if k.startswith('val/') and k not in ('val/time', 'val/data_time')}


def loss_falls(losses: List[float], fraction: float = 0.8) -> bool:
    """Whether the mean of the last fifth of ``losses`` is below ``fraction`` times that of the first fifth."""
    k = max(len(losses) // 5, 1)
    return bool(np.mean(losses[-k:]) < fraction * np.mean(losses[:k]))


CIFAR_LAYOUTS = ('cifar10', 'cifar100')


def data_options(shapes_root: Path, kind: str) -> List[str]:
    """``--cfg-options`` that point a twin's dataloaders (and the COCO evaluators) at ``shapes_root/kind``; the CIFAR
    twins name the folder themselves (``data_prefix``) and take ``shapes_root``."""
    root = shapes_root if kind in CIFAR_LAYOUTS else shapes_root / kind
    options = [f'{split}_dataloader.dataset.data_root={root}' for split in ('train', 'val', 'test')]
    if kind == 'coco':
        options += [f'{split}_evaluator.ann_file={root}/annotations/instances_val2017.json'
                    for split in ('val', 'test')]
    return options


def run_command(args: List[str], timeout: int = 600, **env: str) -> subprocess.CompletedProcess:
    """Run ``args`` in the repository root with ``env`` added; assert that it exits 0 (showing the output)."""
    result = run_python(args, cwd=ROOT, env={**os.environ, **env}, timeout=timeout)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result
