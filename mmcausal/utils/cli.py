"""The options that ``tools/train.py``, ``tools/test.py`` and ``tools/analysis_tools/eval_resolutions.py`` share,
and the checks of command-line arguments: a path that does not exist ends the program with the parser's usage
error, before anything is loaded.

The config those options name is read by :func:`mmcausal.utils.config_reading.load_config`; errors of the user's
config, data or checkpoint end in one line (:mod:`mmcausal.utils.error_report`).
"""
import argparse
import os
import os.path as osp

from mmengine.config import DictAction

from .checkpoint_coverage import PARTIAL_LOAD_FLAG
from .error_report import DEBUG_ENV


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """``--work-dir``, ``--cfg-options``, ``--launcher``, the launcher's ``--local-rank``, ``--allow-partial-load``
    and ``--debug``."""
    parser.add_argument('--work-dir', help='directory for logs, checkpoints and metrics '
                        '(default: the config\'s work_dir, else work_dirs/<config name>)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs such as '
                        'train_cfg.max_epochs=2 or \'model.backbone.out_indices=[1,2]\'')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher')
    # torch.distributed.launch passes --local-rank (torch >= 2.0) or --local_rank.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    parser.add_argument(PARTIAL_LOAD_FLAG, action='store_true',
                        help='accept a checkpoint (load_from, the evaluated one, Pretrained inits) that loads less '
                        'than half of the weights of the module it is loaded into (default: refused, it is usually '
                        'another model\'s checkpoint or has another key prefix)')
    parser.add_argument('--debug', action='store_true',
                        help='show the full traceback of errors in the config, data or checkpoint '
                        f'(default: one line saying what to change; also {DEBUG_ENV}=1)')


def check_common_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Export ``LOCAL_RANK`` (and ``MMCAUSAL_DEBUG`` for ``--debug``) and reject a missing config path."""
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    if getattr(args, 'debug', False):
        os.environ[DEBUG_ENV] = '1'
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')


def is_checkpoint(path: str) -> bool:
    """Whether the local ``path`` is a checkpoint file or a sharded checkpoint: the directory of per-rank files
    (``rank0.pth`` ...) that sharded training (``FSDPStrategy``, ``state_dict_cfg='local'``) saves."""
    return osp.isfile(path) or osp.isfile(osp.join(path, 'rank0.pth'))


def check_checkpoint_argument(parser: argparse.ArgumentParser, path: str, what: str = 'checkpoint',
                              allow_sharded: bool = False) -> None:
    """Reject a local checkpoint path that does not exist (URLs are left to the loader); a sharded checkpoint
    directory only where ``allow_sharded`` (the runner tools, which read it under the sharded config)."""
    if '://' in path:
        return
    if not (is_checkpoint(path) if allow_sharded else osp.isfile(path)):
        hint = (' (a sharded checkpoint directory: merge it into one file with '
                'tools/model_converters/consolidate_sharded_checkpoint.py)' if is_checkpoint(path) else '')
        parser.error(f'{what} not found: {path}{hint}')
