"""Evaluate one classification checkpoint at several input resolutions and RoPE position schemes, without
retraining (VisionLLaMA paper, Tables 11/12).

    python tools/analysis_tools/eval_resolutions.py CONFIG CHECKPOINT [--sizes 160 224 288 512]
        [--rope-modes 1d 2d as2d] [--anchor N] [--max-batches K] [--out results.json]
        [--work-dir DIR] [--cfg-options k=v ...]

The checkpoint is loaded once. For every size the val dataloader is rebuilt with its test pipeline rescaled
to give ``size x size`` images (ResizeEdge/Resize + CenterCrop keep their ratio, e.g. 256/224; a pipeline
without a resize gets one), and for every RoPE mode the backbone's ``rope_mode`` is switched (same weights,
only the position angles change): ``1d`` flat sequence index, ``2d`` integer grid positions (extrapolation),
``as2d`` AS2DRoPE (positions scaled onto the anchor grid, default: the training grid; ``--anchor`` in
tokens). Prints a table of top-1 (%), rows = RoPE modes, columns = sizes (``*`` marks the training size).
Needs a backbone with a switchable ``rope_mode`` (VisionLLaMA); evaluates single-label top-1.
"""
import argparse
import json
import os
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.models.layers import ROPE_MODES
from mmcausal.utils.cli import (add_common_arguments, check_checkpoint_argument, check_common_arguments, load_config,
                                run)
from mmcausal.utils.resolution_eval import (ResolutionEvalError, evaluate_resolutions, format_table,
                                            rope_backbone)
from mmengine.runner import Runner


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {text}')
    return value


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='classification config file path')
    parser.add_argument('checkpoint', help='checkpoint file (local path or URL)')
    parser.add_argument('--sizes', type=_positive, nargs='+', default=[160, 224, 256, 288, 512],
                        help='square input sizes in pixels')
    parser.add_argument('--rope-modes', nargs='+', default=list(ROPE_MODES), choices=ROPE_MODES,
                        help='RoPE position schemes to compare (rows of the table)')
    parser.add_argument('--anchor', type=_positive,
                        help='AS2DRoPE anchor grid in tokens (default: the backbone\'s, img_size / patch_size)')
    parser.add_argument('--max-batches', type=_positive, help='evaluate only the first K batches per size')
    parser.add_argument('--out', help='also write the results to this .json file')
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    check_common_arguments(parser, args)
    check_checkpoint_argument(parser, args.checkpoint)
    if args.launcher != 'none':
        parser.error('this tool evaluates in a single process; run it with --launcher none')
    if args.out is not None and not args.out.endswith('.json'):
        parser.error(f'--out must be a .json file, got {args.out}')
    args.sizes = list(dict.fromkeys(args.sizes))
    args.rope_modes = list(dict.fromkeys(args.rope_modes))
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args)
    loader_name = 'val_dataloader' if cfg.get('val_dataloader') else 'test_dataloader'
    if not cfg.get(loader_name):
        raise SystemExit(f'{args.config} has neither a val_dataloader nor a test_dataloader to evaluate.')
    dataloader_cfg = cfg[loader_name].to_dict() if hasattr(cfg[loader_name], 'to_dict') else cfg[loader_name]

    def evaluate(runner: Runner) -> None:
        try:
            backbone = rope_backbone(runner.model)
        except ResolutionEvalError as error:
            raise SystemExit(f'{type(error).__name__}: {error}')
        runner.load_checkpoint(args.checkpoint, map_location='cpu')
        anchor = (args.anchor, args.anchor) if args.anchor else tuple(backbone.rope_anchor)
        patch = getattr(getattr(backbone, 'patch_embed', None), 'init_input_size', None)
        train_size = patch[0] if patch and patch[0] == patch[1] else None
        stride = getattr(getattr(getattr(backbone, 'patch_embed', None), 'projection', None), 'stride', (1, ))[0]
        uneven = [size for size in args.sizes if size % stride]
        if uneven:
            runner.logger.warning(f'sizes {uneven} are not multiples of the patch size {stride}: the backbone '
                                  'zero-pads them, and the padded tokens take part in attention and pooling.')
        try:
            results, counts = evaluate_resolutions(
                runner.model, dataloader_cfg, lambda loader: Runner.build_dataloader(loader, seed=runner.seed),
                args.sizes, args.rope_modes, anchor=anchor, max_batches=args.max_batches,
                log=runner.logger.info)
        except ResolutionEvalError as error:
            raise SystemExit(f'{type(error).__name__}: {error}')
        print(f'\nTop-1 (%) of {osp.basename(args.checkpoint)} on {loader_name} '
              f'({", ".join(f"{s}px: {n}" for s, n in counts.items())} images; {type(backbone).__name__} with '
              f'rope_mode={backbone.rope_mode!r} in the config; AS2DRoPE anchor {anchor[0]}x{anchor[1]} tokens; '
              '* = training size)')
        print(format_table(results, args.sizes, train_size), flush=True)
        if args.out is not None:
            os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
            with open(args.out, 'w', encoding='utf-8') as file:
                json.dump(dict(config=args.config, checkpoint=args.checkpoint, dataloader=loader_name,
                               train_size=train_size, config_rope_mode=backbone.rope_mode, anchor=list(anchor),
                               sizes=args.sizes, num_samples={str(s): n for s, n in counts.items()},
                               top1={mode: {str(s): v for s, v in values.items()}
                                     for mode, values in results.items()}), file, indent=2)
            print(f'results written to {args.out}')

    run(cfg, (loader_name, ), evaluate)


if __name__ == '__main__':
    main()
