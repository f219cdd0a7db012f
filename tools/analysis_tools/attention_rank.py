"""Numerical and effective rank of every attention matrix, per layer and head, over a batch of images (iLLaMA
paper Sec. 3.7: Fig. 4 and, per layer, App. E Fig. 11), for several models or attention mask modes side by side.

    python tools/analysis_tools/attention_rank.py CONFIG[:CHECKPOINT] [CONFIG[:CHECKPOINT] ...]
        [--mask-modes causal bidirectional official] [--labels NAME ...] [--images DIR] [--num-images 30]
        [--layer 0] [--head 0] [--rtol R] [--out-dir DIR] [--cfg-options k=v ...]

The attention weights are read through the mixers' AttentionProbe (``record_attention``), so any attention backbone
works; ``--mask-modes`` analyses each model under every mode (iLLaMA's ``model.backbone.mask_mode``; the
checkpoint is loaded into each). Images: ``--images DIR`` through the config's test pipeline, or the config's val
dataloader; the first ``--num-images`` (30, as the paper). Writes to ``--out-dir``:

* ``attention_rank.csv``: model, layer, head, numerical rank (``torch.linalg.matrix_rank``, ``rtol`` default
  ``max(Nq, Nk) * eps(fp32)``), effective rank (Roy & Vetterli 2007: exp of the entropy of the normalised singular
  values) and the index at which the cumulative normalised singular values reach 0.8 (the paper's rank reading),
  each the mean over the images;
* ``attention_rank_curve.png``: Fig. 4, the cumulative normalised singular values of ``--layer`` / ``--head``;
* ``attention_rank_layers.png``: effective and numerical rank per layer, one line per model.

A layer is an attention call in forward order (the blocks of a plain backbone). Models without attention weights
(De-focus Mamba, RetNet) end with a one-line error.
"""
import argparse
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.attention_rank import (
    RANK_HEADER,
    attention_ranks,
    plot_rank_curves,
    plot_rank_layers,
    rank_rows,
)
from mmcausal.analysis.inputs import (
    add_model_arguments,
    build_model,
    check_model_arguments,
    entry_config,
    image_batches,
    positive_int,
)
from mmcausal.analysis.plotting import write_csv
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, 'work_dirs/analysis/attention_rank')
    parser.add_argument('--num-images', type=positive_int, default=30, help='images to average over (default 30)')
    parser.add_argument('--layer', type=int, default=0, help='attention layer of the curve plot (default 0)')
    parser.add_argument('--head', type=int, default=0, help='head of the curve plot (default 0)')
    parser.add_argument('--rtol', type=float,
                        help='relative tolerance of the numerical rank (default max(Nq, Nk) * eps(fp32))')
    args = parser.parse_args(argv)
    args.entries = check_model_arguments(parser, args)
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        results = {}
        for entry in args.entries:
            cfg = entry_config(entry, args.cfg_options)
            model = build_model(cfg, entry.checkpoint)
            results[entry.label] = attention_ranks(model, image_batches(model, cfg, args.num_images, args.images),
                                                   args.rtol)
        paths = [plot_rank_curves(results, args.layer, args.head, osp.join(args.out_dir, 'attention_rank_curve.png')),
                 plot_rank_layers(results, osp.join(args.out_dir, 'attention_rank_layers.png')),
                 write_csv(osp.join(args.out_dir, 'attention_rank.csv'), RANK_HEADER,
                           [row for label, ranks in results.items() for row in rank_rows(label, ranks)])]
    print('| model | layer | rows x cols | numerical rank | effective rank | index at 0.8 |')
    print('|---|---|---|---|---|---|')
    for label, ranks in results.items():
        for layer, rank in enumerate(ranks):
            print(f'| {label} | {layer} | {rank.rows} x {rank.cols} | {float(rank.numerical.mean()):.1f} | '
                  f'{float(rank.effective.mean()):.1f} | {float(rank.index.mean()):.1f} |')
    print('(means over heads and images)\nwritten: ' + ', '.join(paths))


if __name__ == '__main__':
    main()
