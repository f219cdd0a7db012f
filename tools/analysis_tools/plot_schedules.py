"""Plot a config's learning rate, soft-mask rate α and drop-path rate over its whole training, without training.

    python tools/analysis_tools/plot_schedules.py CONFIG [--iters-per-epoch N] [--out-dir DIR] [--cfg-options k=v ...]

The lr comes from the config's ``param_scheduler`` built on a dummy optimizer (the optimizer's base lr, stepped as
mmengine's ParamSchedulerHook steps it), α from ``SoftMaskHook`` and the last block's drop-path rate from
``DropPathScheduleHook`` (each hook's own ``rate_at``), at every iteration. Epoch-based configs need the iterations
per epoch: ``--iters-per-epoch N``, else the batches of the config's train dataloader in one process (its dataset
must exist; a run on G processes has about 1/G of them per epoch). Writes ``<config name>_schedules.png`` and
``.csv`` (iteration, epoch, one column per curve) to ``--out-dir``.
"""
import argparse
import os.path as osp
from typing import List, Optional

from mmengine.config import DictAction

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.inputs import positive_int
from mmcausal.analysis.schedules import compute_schedules, plot_schedules, write_schedules_csv
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='training config file')
    parser.add_argument('--iters-per-epoch', type=positive_int,
                        help='training iterations per epoch (default: counted from the train dataloader)')
    parser.add_argument('--out-dir', default='work_dirs/analysis/schedules', help='where the PNG and CSV go')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings, key=value')
    parser.add_argument('--debug', action='store_true', help='show the full traceback of input errors')
    args = parser.parse_args(argv)
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    name = osp.splitext(osp.basename(args.config))[0]
    with user_errors_end_in_one_line(debug=args.debug or None):
        schedules = compute_schedules(read_config(args.config, args.cfg_options), args.iters_per_epoch)
    paths = [plot_schedules(schedules, name, osp.join(args.out_dir, f'{name}_schedules.png')),
             write_schedules_csv(schedules, osp.join(args.out_dir, f'{name}_schedules.csv'))]
    epochs = '' if schedules.iters_per_epoch is None else f' ({schedules.iters_per_epoch} per epoch)'
    print(f'{len(schedules.iterations)} iterations{epochs}: ' + ', '.join(
        f'{key} {values[0]:.4g} -> {values.max():.4g} (max) -> {values[-1]:.4g}'
        for key, values in schedules.curves.items()))
    print('written: ' + ', '.join(paths))


if __name__ == '__main__':
    main()
