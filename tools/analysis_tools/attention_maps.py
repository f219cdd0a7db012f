"""Attention and gradient maps of one image at one layer, one row per model (De-focus paper Fig. 1 and App. B.1).

    python tools/analysis_tools/attention_maps.py CONFIG[:CHECKPOINT] [CONFIG[:CHECKPOINT] ...]
        [--layer -1] [--query cls|INDEX] [--output cls|INDEX] [--maps attention gradient] [--image-index 0]
        [--images DIR] [--mask-modes ...] [--labels NAME ...] [--out-dir DIR] [--cfg-options k=v ...]

* Attention (``--maps attention``): the weights of ``--query`` (``cls`` or a patch index ``r * w + c`` of the
  image's token grid) over the image's tokens at ``--layer`` (negative from the end), per head and averaged over
  heads, read through the mixer's AttentionProbe, and the layer's attention matrix between the image tokens (mean
  over heads, diagonal 0, divided by its maximum: Fig. 1(a)). Models without attention weights (De-focus Mamba,
  RetNet) end with a one-line error: ask them for ``--maps gradient``.
* Gradient (``--maps gradient``): ``|d y / d x|`` summed over the colour channels of the preprocessed input pixels,
  ``y`` the L2 norm of ``--output`` (``cls`` or a patch index) at the output of ``--layer``: the paper's receptive
  field (App. B.1) taken down to the pixels. Strictly causal models give 0 on every patch after the output token.

Writes ``attention_maps.png`` (every map divided by its maximum, with colour bars; the gradient averaged over every
token's pixels; layers and heads counted from 1, as the README does) and ``attention_maps.csv`` (the query's
attention per head and mean on the key grid, the gradient per token; ``layer`` and ``head`` from 0, as ``--layer``
takes them) to ``--out-dir``. Fig. 1's contrast (over-focused causal attention vs De-focus) on the twins, layer 3
of 4 (Fig. 1: 11 of 12)::

    python tools/analysis_tools/attention_maps.py configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py:ILLAMA.pth \\
        configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py:DEFOCUS_VIT.pth --layer -2
"""
import argparse
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.attention_maps import (
    MAP_HEADER,
    MAP_KINDS,
    MapRow,
    attention_map,
    gradient_map,
    map_rows_csv,
    plot_maps,
)
from mmcausal.analysis.errors import AnalysisError
from mmcausal.analysis.inputs import add_model_arguments, build_model, check_model_arguments, entry_config, nth_image
from mmcausal.analysis.plotting import display_image, write_csv
from mmcausal.analysis.tokens import analysed_backbone, layer_block, parse_token
from mmcausal.utils.error_report import user_errors_end_in_one_line


def _token(text: str):
    try:
        return parse_token(text)
    except AnalysisError as error:
        raise argparse.ArgumentTypeError(str(error))


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, 'work_dirs/analysis/attention_maps')
    parser.add_argument('--layer', type=int, default=-1, help='block index, negative from the end (default -1)')
    parser.add_argument('--query', type=_token, default='cls', help='query token of the attention map (default cls)')
    parser.add_argument('--output', type=_token, default='cls', help='output token of the gradient map (default cls)')
    parser.add_argument('--maps', nargs='+', choices=MAP_KINDS, default=list(MAP_KINDS), help='maps to draw')
    parser.add_argument('--image-index', type=int, default=0, help='which image, in dataset order (default 0)')
    args = parser.parse_args(argv)
    args.entries = check_model_arguments(parser, args)
    if args.image_index < 0:
        parser.error(f'--image-index must be >= 0, got {args.image_index}')
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        rows, table = [], []
        for entry in args.entries:
            cfg = entry_config(entry, args.cfg_options)
            model = build_model(cfg, entry.checkpoint)
            image = nth_image(model, cfg, args.image_index, args.images)
            row = MapRow(entry.label, display_image(image[0]), layer_block(model, args.layer)[0],
                         len(analysed_backbone(model).blocks()))
            if 'attention' in args.maps:
                row.attention = attention_map(model, image, args.layer, args.query)
            if 'gradient' in args.maps:
                row.gradient = gradient_map(model, image, args.layer, args.output)
            rows.append(row)
            table += map_rows_csv(row)
        paths = [plot_maps(rows, args.query, args.output, osp.join(args.out_dir, 'attention_maps.png')),
                 write_csv(osp.join(args.out_dir, 'attention_maps.csv'), MAP_HEADER, table)]
    print('written: ' + ', '.join(paths))


if __name__ == '__main__':
    main()
