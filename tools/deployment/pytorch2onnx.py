"""Export a model of an mmcausal config to ONNX and check it with ONNX Runtime.

    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT OUT.onnx [--shape H W] [--batch B]
        [--dynamic [all|batch]] [--backbone-only | --features | --network] [--opset 20] [--no-optimize] [--no-check]
        [--cfg-options k=v ...] [--allow-partial-load] [--debug]

The graph takes what ``model(inputs, mode='tensor')`` takes, the data preprocessor's output (``(B, 3, H, W)`` fp32
images, normalised with the config's ``mean`` / ``std``), and returns what it returns: a classifier's pre-softmax
scores ``(B, classes)``, a segmentor's logits at its decode head's stride ``s`` ``(B, classes, H / s, W / s)``
(mmseg's ``predict`` resizes them to the image, bilinear, ``align_corners=False``); with ``--backbone-only`` the
backbone's feature maps, with ``--features`` those of the backbone and neck (``extract_feat``; a detector exports
only this far).
A class-conditional generator exports its diffusion network with ``--network`` (fixed size): inputs ``x`` latents
``(B, C, H, W)`` (``--shape``: the latent size, default the network's ``input_size``), ``t`` ``(B,)`` fp32 and ``y``
``(B,)`` int64 labels, output ``(B, C_out, H, W)``.

``--dynamic`` (``all``) makes the batch and the image size dynamic (any sides, multiples of the strides or not:
padding, RoPE and position tables are computed from the input's size inside the graph, and De-focus Mamba's scan has
no loop over the tokens; trace at a ``--shape`` with several windows per side); ``--dynamic batch`` keeps the image
size of ``--shape``. Every export is run in ONNX Runtime and compared with PyTorch (at other batch and image sizes when
dynamic); a model whose graph holds only at the traced size (UperNet's pyramid pooling) is refused in one line that
says what to use. Standard ONNX ops only, opset 20 by default.

The checkpoint is loaded as ``tools/test.py`` loads it: through mmcausal's safe loader, refused when it fits less than
half of the model (``--allow-partial-load`` to accept). A mistake in the input ends with one line (exit status 1);
``--debug`` shows the traceback.
"""
import argparse
import os
import os.path as osp
from typing import List, Optional

from mmengine.config import DictAction

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.deployment import DEFAULT_OPSET, build_export_model, export_onnx, exportable_part
from mmcausal.utils.checkpoint_coverage import PARTIAL_LOAD_FLAG, partial_loads_allowed
from mmcausal.utils.cli import check_checkpoint_argument
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import DEBUG_ENV, user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file (local path or URL)')
    parser.add_argument('out', help='the ONNX file to write (.onnx)')
    parser.add_argument('--shape', type=int, nargs=2, metavar=('H', 'W'),
                        help='input image size (default: the backbone\'s img_size, else 224)')
    parser.add_argument('--batch', type=int, default=1, help='batch size of a fixed-batch export (default 1)')
    parser.add_argument('--dynamic', nargs='?', const='all', choices=('all', 'batch'),
                        help='dynamic batch and image size (all, the default) or batch only')
    part = parser.add_mutually_exclusive_group()
    part.add_argument('--backbone-only', action='store_true', help='export model.backbone (its feature maps)')
    part.add_argument('--features', action='store_true',
                      help='export model.extract_feat: backbone and neck (the part of a detector that exports)')
    part.add_argument('--network', action='store_true',
                      help='export a generator\'s diffusion network (inputs x, t, y; a fixed size)')
    parser.add_argument('--opset', type=int, default=DEFAULT_OPSET, help=f'ONNX opset (default {DEFAULT_OPSET})')
    parser.add_argument('--no-optimize', action='store_true', help='skip the exporter\'s graph optimisation')
    parser.add_argument('--no-check', action='store_true',
                        help='skip the comparison of ONNX Runtime with PyTorch at other sizes')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value pairs')
    parser.add_argument(PARTIAL_LOAD_FLAG, action='store_true',
                        help='accept a checkpoint that loads less than half of the model\'s weights')
    parser.add_argument('--debug', action='store_true', help='show the full traceback of input errors')
    args = parser.parse_args(argv)
    check_checkpoint_argument(parser, args.checkpoint)
    if not args.out.endswith('.onnx'):
        parser.error(f'the output must be an .onnx file, got {args.out}')
    if args.shape is not None and min(args.shape) < 1 or args.batch < 1:
        parser.error('--shape and --batch must be positive')
    return args


def default_shape(cfg, part: str) -> List[int]:
    """The backbone's ``img_size`` (an int or ``(H, W)``), else 224 x 224; for ``part='network'`` the network's
    latent ``input_size``."""
    if part == 'network':
        size = cfg.model.get('network', {}).get('input_size', 32)
    else:
        size = cfg.model.get('backbone', {}).get('img_size', 224)
    return [size, size] if isinstance(size, int) else list(size)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.debug:
        os.environ[DEBUG_ENV] = '1'
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    with user_errors_end_in_one_line():
        cfg = read_config(args.config, args.cfg_options)
        with partial_loads_allowed(args.allow_partial_load):
            model = build_export_model(cfg, args.checkpoint)
        part = ('backbone' if args.backbone_only else 'features' if args.features else 'network' if args.network
                else 'model')
        module = exportable_part(model, part)
        height, width = args.shape or default_shape(cfg, part)
        channels = model.network.in_channels if part == 'network' else 3
        exported = export_onnx(module, args.out, (args.batch, channels, height, width), args.dynamic, args.opset,
                               optimize=not args.no_optimize, check=not args.no_check)
    shape = ' x '.join('dynamic' if side is None else str(side) for side in exported.input_shape)
    multiple = ' (any image size)' if args.dynamic == 'all' else ''
    inputs = (f'inputs: x {shape}, t ({args.batch},), y ({args.batch},)' if part == 'network' else
              f'input images: {shape}{multiple}')
    print(f'written: {exported.path} (opset {exported.opset}); {inputs}; outputs: '
          f'{", ".join(exported.output_names)}' + ('' if args.no_check else '; checked against PyTorch in ONNX '
                                                   'Runtime'))


if __name__ == '__main__':
    main()
