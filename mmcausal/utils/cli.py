"""What ``tools/train.py`` and ``tools/test.py`` share: common options, config merging, clear errors."""
import argparse
import os
import os.path as osp
from typing import Any, Callable, Iterator, Sequence, Tuple

from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

from .checkpoint_trust import CheckpointFormatError, UntrustedCheckpointError
from .dataset_check import DatasetNotFoundError, check_dataset_paths


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--work-dir``, ``--cfg-options``, ``--launcher`` and the launcher's ``--local-rank``."""
    parser.add_argument('--work-dir', help='directory for logs, checkpoints and metrics '
                        '(default: the config\'s work_dir, else work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs such as '
                        'train_cfg.max_epochs=2 or \'model.backbone.out_indices=[1,2]\'')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def check_common_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Export ``LOCAL_RANK`` and reject a config path that does not exist."""
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')


def check_checkpoint_argument(parser: argparse.ArgumentParser, path: str, what: str = 'checkpoint') -> None:
    """Reject a local checkpoint path that does not exist (URLs are left to the loader)."""
    if '://' not in path and not osp.isfile(path):
        parser.error(f'{what} not found: {path}')


def load_config(args: argparse.Namespace) -> Config:
    """Load ``args.config`` and apply ``--cfg-options``, ``--launcher`` and ``--work-dir``.

    ``work_dir`` priority: command line > config > ``work_dirs/<config name>``.
    """
    cfg = Config.fromfile(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        try:
            cfg.merge_from_dict(args.cfg_options)
        except (TypeError, KeyError) as error:
            raise SystemExit(f'--cfg-options could not be merged into {args.config}: {error}')
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    return cfg


class PretrainedNotFoundError(FileNotFoundError):
    """A ``Pretrained`` init or ``load_from`` names a local file that does not exist."""


def _pretrained_paths(node: Any, where: str) -> Iterator[Tuple[str, str]]:
    if isinstance(node, dict):
        if node.get('type') == 'Pretrained' and isinstance(node.get('checkpoint'), str):
            yield f'{where}.checkpoint', node['checkpoint']
        for key, value in node.items():
            yield from _pretrained_paths(value, f'{where}.{key}')
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            yield from _pretrained_paths(value, f'{where}[{i}]')


def check_pretrained_paths(cfg: Config) -> None:
    """Raise :class:`PretrainedNotFoundError` naming the config key of a missing local checkpoint."""
    paths = list(_pretrained_paths(cfg.get('model', {}).to_dict() if cfg.get('model') else {}, 'model'))
    if cfg.get('load_from'):
        paths.append(('load_from', cfg.load_from))
    for key, path in paths:
        if '://' not in path and not osp.isfile(path):
            raise PretrainedNotFoundError(
                f'{key} = {path!r} does not exist. Produce it first (pre-training run or a converter in '
                f'tools/model_converters/) or point to it with --cfg-options {key}=PATH.')


def run(cfg: Config, dataloaders: Sequence[str], action: Callable[[Runner], object],
        check_pretrained: bool = True) -> None:
    """Check the datasets (and, for training, the ``Pretrained`` / ``load_from`` files), build the Runner and
    call ``action(runner)``; known user errors end the program with their message instead of a traceback."""
    try:
        check_dataset_paths(cfg, dataloaders)
        if check_pretrained:
            check_pretrained_paths(cfg)
        runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
        action(runner)
    except (DatasetNotFoundError, PretrainedNotFoundError, UntrustedCheckpointError, CheckpointFormatError) as error:
        raise SystemExit(f'{type(error).__name__}: {error}')
