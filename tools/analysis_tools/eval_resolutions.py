"""Evaluate one classification checkpoint at several input resolutions and RoPE position schemes, without
retraining (VisionLLaMA paper, Tables 11/12).

    python tools/analysis_tools/eval_resolutions.py CONFIG CHECKPOINT [--sizes 160 224 288 512 224x320]
        [--rope-modes 1d 2d as2d] [--as2d-scalings isotropic per_axis] [--anchor N] [--max-batches K]
        [--out results.json] [--out-dir DIR] [--work-dir DIR] [--cfg-options k=v ...]

The checkpoint is loaded once. For every size (``S`` for S x S, or ``HxW``) the val dataloader is rebuilt
with its test pipeline rescaled to give images of that size (ResizeEdge/Resize + CenterCrop keep their
ratio, e.g. 256/224; a pipeline without a resize gets one; non-square sizes resize the short side to
``max(H, W)`` and centre-crop, never stretch), and for every RoPE mode the backbone's ``rope_mode`` is
switched (same weights, only the position angles change): ``1d`` flat sequence index, ``2d`` integer grid
positions (extrapolation), ``as2d`` AS2DRoPE (positions scaled onto the anchor grid, default: the
backbone's ``rope_anchor``; ``--anchor`` in tokens), once per ``--as2d-scalings`` entry (default: the
backbone's ``as2d_scaling``). Prints a table of top-1 (%), rows = RoPE schemes, columns = sizes (``*``
marks the training size); ``--out-dir`` also draws it (``top1_vs_resolution.png``: top-1 against the size, one
line per scheme) and writes it as ``top1_vs_resolution.csv``.
Needs a backbone with a switchable ``rope_mode`` (VisionLLaMA); evaluates single-label top-1.
"""
import argparse
import json
import os
import os.path as osp
from typing import List, Optional, Tuple, Union

from mmengine.runner import Runner

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal before any Runner)
from mmcausal.analysis.inputs import positive_int
from mmcausal.analysis.resolution_eval import evaluate_resolutions, format_table, rope_backbone, rope_schemes
from mmcausal.analysis.resolution_pipeline import ResolutionEvalError, hw, size_label
from mmcausal.analysis.resolution_plot import write_resolution_plot
from mmcausal.apis import run
from mmcausal.models.layers import AS2D_SCALINGS, ROPE_MODES
from mmcausal.utils.cli import add_common_arguments, check_checkpoint_argument, check_common_arguments
from mmcausal.utils.config_reading import load_config


def _size(text: str) -> Tuple[int, int]:
    """``'96'`` -> ``(96, 96)``; ``'64x96'`` -> ``(64, 96)`` (H x W)."""
    parts = text.lower().split('x')
    if len(parts) > 2 or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f'sizes are S or HxW with positive integers, got {text!r}')
    return hw((int(parts[0]), int(parts[-1])))


def _json_size(size: Tuple[int, int]) -> Union[int, str]:
    """A size in the JSON output: ``96`` for 96 x 96, ``'64x96'`` (H x W) otherwise."""
    return size[0] if size[0] == size[1] else size_label(size)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='classification config file path')
    parser.add_argument('checkpoint', help='checkpoint file (local path or URL)')
    parser.add_argument('--sizes', type=_size, nargs='+', default=[(s, s) for s in (160, 224, 256, 288, 512)],
                        help='input sizes in pixels: S (S x S) or HxW, e.g. 224 224x320')
    parser.add_argument('--rope-modes', nargs='+', default=list(ROPE_MODES), choices=ROPE_MODES,
                        help='RoPE position schemes to compare (rows of the table)')
    parser.add_argument('--as2d-scalings', nargs='+', choices=AS2D_SCALINGS,
                        help='AS2DRoPE scalings to compare (one as2d row each; default: the backbone\'s)')
    parser.add_argument('--anchor', type=positive_int,
                        help='AS2DRoPE anchor grid in tokens (default: the backbone\'s, img_size / patch_size)')
    parser.add_argument('--max-batches', type=positive_int, help='evaluate only the first K batches per size')
    parser.add_argument('--out', help='also write the results to this .json file')
    parser.add_argument('--out-dir', help='also plot them: top1_vs_resolution.png and .csv in this folder')
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
    args.as2d_scalings = list(dict.fromkeys(args.as2d_scalings or [None]))
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
        train_size = tuple(patch) if patch else None
        stride = getattr(getattr(getattr(backbone, 'patch_embed', None), 'projection', None), 'stride', (1, ))[0]
        uneven = [size_label(size) for size in args.sizes if any(side % stride for side in size)]
        if uneven:
            runner.logger.warning(f'sizes {uneven} are not multiples of the patch size {stride}: the backbone '
                                  'zero-pads them, and the padded tokens take part in attention and pooling.')
        try:
            schemes = rope_schemes(args.rope_modes, args.as2d_scalings)
            results, counts = evaluate_resolutions(
                runner.model, dataloader_cfg, lambda loader: Runner.build_dataloader(loader, seed=runner.seed),
                args.sizes, schemes, anchor=anchor, max_batches=args.max_batches, log=runner.logger.info)
        except ResolutionEvalError as error:
            raise SystemExit(f'{type(error).__name__}: {error}')
        scaling = getattr(backbone, 'as2d_scaling', None)
        print(f'\nTop-1 (%) of {osp.basename(args.checkpoint)} on {loader_name} '
              f'({", ".join(f"{size_label(s)}px: {n}" for s, n in counts.items())} images; '
              f'{type(backbone).__name__} with rope_mode={backbone.rope_mode!r} and as2d_scaling={scaling!r} in '
              f'the config; AS2DRoPE anchor {anchor[0]}x{anchor[1]} tokens; * = training size)')
        print(format_table(results, args.sizes, train_size), flush=True)
        if args.out is not None:
            os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
            with open(args.out, 'w', encoding='utf-8') as file:
                json.dump(dict(config=args.config, checkpoint=args.checkpoint, dataloader=loader_name,
                               train_size=_json_size(train_size) if train_size else None,
                               config_rope_mode=backbone.rope_mode, config_as2d_scaling=scaling,
                               anchor=list(anchor), sizes=[_json_size(s) for s in args.sizes],
                               num_samples={size_label(s): n for s, n in counts.items()},
                               top1={label: {size_label(s): v for s, v in values.items()}
                                     for label, values in results.items()}), file, indent=2)
            print(f'results written to {args.out}')
        if args.out_dir is not None:
            paths = write_resolution_plot(results, args.sizes, args.out_dir, train_size,
                                          f'{osp.splitext(osp.basename(args.config))[0]}: top-1 vs resolution')
            print('plot written to ' + ' and '.join(paths))

    run(cfg, (loader_name, ), evaluate, evaluating=True)


if __name__ == '__main__':
    main()
