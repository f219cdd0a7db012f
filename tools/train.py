"""Train a model from an mmcausal (or any OpenMMLab 2.x) config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp] [--auto-scale-lr]
                                 [--cfg-options k=v ...] [--launcher none|pytorch|slurm|mpi]
    bash tools/dist_train.sh CONFIG GPUS [args]      # distributed; on CPU-only hosts it uses gloo
"""
import argparse
import os
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.utils import (CheckpointFormatError, DatasetNotFoundError, UntrustedCheckpointError,
                            check_dataset_paths)
from mmengine.config import Config, DictAction
from mmengine.device import get_device
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

RESUME_LATEST = 'auto'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='directory for logs and checkpoints '
                        '(default: the config\'s work_dir, else work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', const=RESUME_LATEST, metavar='CKPT',
                        help='resume from CKPT, or without a value from the latest checkpoint in '
                        'the work directory')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (AmpOptimWrapper; needs a GPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the actual total batch size relative to '
                        'the config\'s auto_scale_lr.base_batch_size')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs such as '
                        'train_cfg.max_epochs=2 or \'model.backbone.out_indices=[1,2]\'')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if args.resume not in (None, RESUME_LATEST) and '://' not in args.resume \
            and not osp.isfile(args.resume):
        parser.error(f'checkpoint to resume from not found: {args.resume}')
    if args.amp and get_device() == 'cpu':
        parser.error('--amp needs a GPU (mmengine\'s AmpOptimWrapper cannot run on CPU) and none '
                     'is available here; train without --amp.')
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
    if args.amp:
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    if args.auto_scale_lr:
        if 'base_batch_size' not in (cfg.get('auto_scale_lr') or {}):
            raise SystemExit('--auto-scale-lr needs auto_scale_lr = dict(base_batch_size=...) in '
                             'the config.')
        cfg.auto_scale_lr.enable = True
    if args.resume == RESUME_LATEST:
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume
    return cfg


def main() -> None:
    args = parse_args()
    cfg = merge_args(Config.fromfile(args.config), args)
    try:
        check_dataset_paths(cfg, ('train_dataloader', 'val_dataloader'))
    except DatasetNotFoundError as error:
        raise SystemExit(str(error))
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    try:
        runner.train()
    except (UntrustedCheckpointError, CheckpointFormatError) as error:
        raise SystemExit(f'{type(error).__name__}: {error}')


if __name__ == '__main__':
    main()
