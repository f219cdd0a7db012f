"""Expected calibration error and reliability diagram of classifiers (iLLaMA paper Sec. 4.3: Table 8 and App. G,
Fig. 7), several models side by side.

    python tools/analysis_tools/calibration.py CONFIG[:CHECKPOINT] [CONFIG[:CHECKPOINT] ...]
        [--mask-modes causal bidirectional official] [--labels NAME ...] [--images DIR] [--num-images N]
        [--num-bins 15] [--out-dir DIR] [--cfg-options k=v ...]

Images and labels: the config's val dataloader (labels from its data samples), or ``--images DIR``, a folder of one
subfolder per class (sorted folder names = class indices, as ImageNet's WNIDs), through the config's test pipeline;
all of them, or the first ``--num-images``. Confidence = the largest softmax probability, a hit = a correct top-1
prediction; ``--num-bins`` equal-width confidence bins ``((b - 1) / M, b / M]`` (15, as Guo et al. 2017 and the
paper) give ``ECE = sum_b |B_b| / n * |acc(B_b) - conf(B_b)|``. Writes to ``--out-dir``:

* ``calibration.csv``: model, images, top-1, mean confidence, ECE, bins;
* ``calibration_bins.csv``: per model and bin: edges, images, accuracy, mean confidence, gap (accuracy - confidence);
* ``reliability.png``: Fig. 7, accuracy per confidence bin with its gap to the bin's confidence, over the share of
  images per bin, one panel per model.

A config whose model is not a classifier, or without a val (or test) dataloader, ends with a one-line error.
"""
import argparse
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.calibration import (
    BINS_HEADER,
    NUM_BINS,
    SUMMARY_HEADER,
    bin_rows,
    check_classifier,
    evaluate_calibration,
    labelled_batches,
    plot_reliability,
    summary_rows,
)
from mmcausal.analysis.inputs import (
    add_model_arguments,
    build_model,
    check_model_arguments,
    entry_config,
    positive_int,
)
from mmcausal.analysis.plotting import write_csv
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, 'work_dirs/analysis/calibration')
    parser.add_argument('--num-images', type=positive_int,
                        help='evaluate only the first N images (default: all of them)')
    parser.add_argument('--num-bins', type=positive_int, default=NUM_BINS,
                        help=f'equal-width confidence bins of the ECE (default {NUM_BINS})')
    args = parser.parse_args(argv)
    args.entries = check_model_arguments(parser, args)
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        results = {}
        for entry in args.entries:
            cfg = entry_config(entry, args.cfg_options)
            model = check_classifier(build_model(cfg, entry.checkpoint))
            batches = labelled_batches(model, cfg, args.num_images, args.images)
            results[entry.label] = evaluate_calibration(model, batches, args.num_bins)
        paths = [plot_reliability(results, osp.join(args.out_dir, 'reliability.png')),
                 write_csv(osp.join(args.out_dir, 'calibration.csv'), SUMMARY_HEADER, summary_rows(results)),
                 write_csv(osp.join(args.out_dir, 'calibration_bins.csv'), BINS_HEADER, bin_rows(results))]
    print('| model | images | top-1 (%) | mean confidence | ECE |')
    print('|---|---|---|---|---|')
    for label, result in results.items():
        print(f'| {label} | {result.n} | {100 * result.top1:.2f} | {result.mean_confidence:.4f} | {result.ece:.4f} |')
    print(f'(ECE over {args.num_bins} equal-width confidence bins)\nwritten: ' + ', '.join(paths))


if __name__ == '__main__':
    main()
