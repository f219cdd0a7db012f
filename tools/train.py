"""Train a model from an mmcausal (or any OpenMMLab 2.x) config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp] [--auto-scale-lr]
                                 [--cfg-options k=v ...] [--launcher none|pytorch|slurm|mpi] [--debug]
    bash tools/dist_train.sh CONFIG GPUS [args]      # distributed; on CPU-only hosts it uses gloo
    torchrun --nnodes N --node_rank R --master_addr HOST --nproc_per_node 8 tools/train.py CONFIG --launcher pytorch

A config with ``runner_type = 'FlexibleRunner'`` (the ``*-fsdp-*`` configs of the Large models) gets mmengine's
``FlexibleRunner`` and its ``strategy`` (FSDP sharding); ``--resume`` then takes a sharded checkpoint directory.

A mistake in the config, data or checkpoint ends with one line saying what to change (exit status 1);
``--debug`` shows its full traceback instead.

Fine-tuning a whole trained model (``--cfg-options load_from=PATH``, e.g. a released detector) skips the config's
``Pretrained`` inits whose file is missing (the backbone's ImageNet file): ``load_from``'s weights replace them.
"""
import argparse
import logging
from typing import List, Optional

from mmengine.config import Config
from mmengine.device import get_device
from mmengine.logging import print_log

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.apis import run
from mmcausal.utils import end_distributed_run
from mmcausal.utils.cli import add_common_arguments, check_checkpoint_argument, check_common_arguments
from mmcausal.utils.config_check import skip_pretrained_replaced_by_load_from
from mmcausal.utils.config_reading import load_config

RESUME_LATEST = 'auto'


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--resume', nargs='?', const=RESUME_LATEST, metavar='CKPT',
                        help='resume from CKPT, or without a value from the latest checkpoint in '
                        'the work directory')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (AmpOptimWrapper; needs a GPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by the actual total batch size relative to '
                        'the config\'s auto_scale_lr.base_batch_size')
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    if args.resume not in (None, RESUME_LATEST):
        check_checkpoint_argument(parser, args.resume, 'checkpoint to resume from', allow_sharded=True)
    if args.amp and get_device() == 'cpu':
        parser.error('--amp needs a GPU (mmengine\'s AmpOptimWrapper cannot run on CPU) and none '
                     'is available here; train without --amp.')
    return args


def apply_train_options(cfg: Config, args: argparse.Namespace) -> Config:
    """Apply ``--amp``, ``--auto-scale-lr`` and ``--resume`` to ``cfg``."""
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
    for key, path in skip_pretrained_replaced_by_load_from(cfg):
        print_log(f'{key} = {path!r} does not exist: skipped, since load_from = {cfg.load_from!r} replaces '
                  'the weights it would initialise.', logger='current', level=logging.WARNING)
    return cfg


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    cfg = apply_train_options(load_config(args), args)
    run(cfg, ('train_dataloader', 'val_dataloader'), lambda runner: runner.train(), loops=('train', ))


if __name__ == '__main__':
    main()
    end_distributed_run()
