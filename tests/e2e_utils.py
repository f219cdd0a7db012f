"""Helpers for the end-to-end tests: load a repo config, point it at test data, run it."""
from pathlib import Path
from typing import Any, Dict, List

from mmengine.config import Config, ConfigDict
from mmengine.runner import Runner

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
