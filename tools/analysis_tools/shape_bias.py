"""Shape-texture bias of classifiers on cue-conflict images (Geirhos et al. 2019; iLLaMA paper Sec. 4.3: Table 8
and App. H, Fig. 8), several models side by side.

    python tools/analysis_tools/shape_bias.py CONFIG[:CHECKPOINT] [CONFIG[:CHECKPOINT] ...] --images DIR
        [--categories auto|imagenet16|classes] [--mask-modes ...] [--labels NAME ...] [--out-dir DIR]
        [--cfg-options k=v ...]

``--images DIR`` is a local cue-conflict folder in the published layout,
``DIR/<shape category>/<shape><n>-<texture><m>.png`` (the 1280 images of model-vs-human's ``cue-conflict`` set, or
the shapes set of ``make_shapes_datasets.py --which cue-conflict``); nothing is downloaded. The images go through
each config's test pipeline. ``--categories``: ``imagenet16`` maps the 1000 ImageNet classes to the 16 categories of
model-vs-human, ``classes`` makes each class of the config's dataset its own category (the shapes classifiers),
``auto`` (default) takes the first for a 1000-class model, else the second. The decision on an image is the
category with the highest mean softmax probability over its classes; the shape bias is ``shape decisions / (shape
+ texture decisions)`` over the images whose shape and texture categories differ. Writes to ``--out-dir``:

* ``shape_bias.csv``: per model and shape category: images, shape / texture / other decisions, shape bias; the
  pooled result (the dashed lines of Fig. 8) and the mean over the categories;
* ``shape_bias_decisions.csv``: every image's categories and decision;
* ``shape_bias.png``: Fig. 8, the fraction of shape decisions per category, the pooled bias dashed.

A missing folder, a misnamed image, a category the mapping does not know or a config whose model is not a
classifier ends with a one-line error.
"""
import argparse
import os.path as osp
from typing import List, Optional

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.calibration import check_classifier
from mmcausal.analysis.inputs import add_model_arguments, build_model, check_model_arguments, entry_config
from mmcausal.analysis.plotting import write_csv
from mmcausal.analysis.shape_bias import (
    CATEGORY_KINDS,
    DECISIONS_HEADER,
    SUMMARY_HEADER,
    categories_for,
    decision_rows,
    evaluate_shape_bias,
    num_classes_of,
    plot_shape_bias,
    read_stimuli,
    stimulus_batches,
    summary_rows,
)
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser, 'work_dirs/analysis/shape_bias')
    parser._option_string_actions['--images'].help = (
        'the cue-conflict folder, DIR/<shape category>/<shape><n>-<texture><m>.png (required)')
    parser.add_argument('--categories', choices=CATEGORY_KINDS, default='auto',
                        help='class -> category mapping: imagenet16 (the 16 categories of model-vs-human), classes '
                        '(every class of the config\'s dataset its own category) or auto (default: imagenet16 for '
                        '1000 classes, else classes)')
    args = parser.parse_args(argv)
    if args.images is None:
        parser.error('--images DIR is required: the cue-conflict folder (DIR/<shape category>/<images>)')
    args.entries = check_model_arguments(parser, args)
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        stimuli = read_stimuli(args.images)
        results = {}
        for entry in args.entries:
            cfg = entry_config(entry, args.cfg_options)
            model = check_classifier(build_model(cfg, entry.checkpoint))
            categories = categories_for(args.categories, cfg, num_classes_of(model))
            results[entry.label] = evaluate_shape_bias(model, stimulus_batches(model, cfg, args.images), stimuli,
                                                       categories)
        paths = [plot_shape_bias(results, osp.join(args.out_dir, 'shape_bias.png')),
                 write_csv(osp.join(args.out_dir, 'shape_bias.csv'), SUMMARY_HEADER, summary_rows(results)),
                 write_csv(osp.join(args.out_dir, 'shape_bias_decisions.csv'), DECISIONS_HEADER,
                           decision_rows(results))]
    print('| model | shape bias (pooled) | mean over categories | shape | texture | other | conflict images |')
    print('|---|---|---|---|---|---|---|')
    for label, result in results.items():
        counts = result.overall
        print(f'| {label} | {counts.bias:.4f} | {result.category_mean:.4f} | {counts.shape} | {counts.texture} | '
              f'{counts.other} | {counts.images} |')
    print(f'({results[next(iter(results))].excluded} images of one category for shape and texture left out)\n'
          'written: ' + ', '.join(paths))


if __name__ == '__main__':
    main()
