"""Test (and evaluate) a checkpoint with an mmcausal (or any OpenMMLab 2.x) config.

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out results.pkl]
                                           [--cfg-options k=v ...] [--launcher none|pytorch|slurm|mpi] [--debug]
    bash tools/dist_test.sh CONFIG CHECKPOINT GPUS [args]

A mistake in the config, data or checkpoint ends with one line saying what to change (exit status 1);
``--debug`` shows its full traceback instead.
"""
import argparse
from typing import List, Optional

from mmengine.evaluator import DumpResults
from mmengine.runner import Runner

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.apis import run
from mmcausal.engine.hooks import EmptyDetectionsHook
from mmcausal.utils import end_distributed_run
from mmcausal.utils.cli import add_common_arguments, check_checkpoint_argument, check_common_arguments
from mmcausal.utils.config_reading import load_config


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (and evaluate) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file (local path or URL), or a sharded checkpoint\'s directory')
    parser.add_argument('--out', help='also dump the raw predictions to this .pkl file')
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    check_checkpoint_argument(parser, args.checkpoint, allow_sharded=True)
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        parser.error(f'--out must be a .pkl or .pickle file, got {args.out}')
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args)
    cfg.load_from = args.checkpoint

    def test(runner: Runner) -> None:
        if args.out is not None:
            runner.test_evaluator.metrics.append(DumpResults(out_file_path=args.out))
        runner.test()
        hook = next(hook for hook in runner.hooks if isinstance(hook, EmptyDetectionsHook))
        if hook.empty_splits:
            raise SystemExit(f'EmptyDetections: {args.checkpoint} predicts no object on the test split (see the '
                             'line above); no metric was computed.')

    run(cfg, ('test_dataloader', ), test, check_pretrained=False, evaluating=True,  # load_from replaces any init
        loops=('test', ))


if __name__ == '__main__':
    main()
    end_distributed_run()
