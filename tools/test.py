"""Test (and evaluate) a checkpoint with an mmcausal (or any OpenMMLab 2.x) config.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out results.pkl]
                                           [--cfg-options k=v ...] [--launcher none|pytorch|slurm|mpi]
    bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]
"""
import argparse
import os
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.utils import (CheckpointFormatError, DatasetNotFoundError, UntrustedCheckpointError,
                            check_dataset_paths)
from mmengine.config import Config, DictAction
from mmengine.evaluator import DumpResults
from mmengine.registry import RUNNERS
from mmengine.runner import Runner


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (and evaluate) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file (local path or URL)')
    parser.add_argument('--work-dir', help='directory for logs and metrics '
                        '(default: the config\'s work_dir, else work_dirs/<config name>)')
    parser.add_argument('--out', help='also dump the raw predictions to this .pkl file')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs such as '
                        'test_dataloader.batch_size=2')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if '://' not in args.checkpoint and not osp.isfile(args.checkpoint):
        parser.error(f'checkpoint not found: {args.checkpoint}')
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        parser.error(f'--out must be a .pkl or .pickle file, got {args.out}')
    return args


def merge_args(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply the command-line options to ``cfg``."""
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    # work_dir priority: CLI > config > config file name
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(args.config))[0])
    cfg.load_from = args.checkpoint
    return cfg


def main() -> None:
    args = parse_args()
    cfg = merge_args(Config.fromfile(args.config), args)
    try:
        check_dataset_paths(cfg, ('test_dataloader', ))
    except DatasetNotFoundError as error:
        raise SystemExit(str(error))
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    if args.out is not None:
        runner.test_evaluator.metrics.append(DumpResults(out_file_path=args.out))
    try:
        runner.test()
    except (UntrustedCheckpointError, CheckpointFormatError) as error:
        raise SystemExit(f'{type(error).__name__}: {error}')


if __name__ == '__main__':
    main()
