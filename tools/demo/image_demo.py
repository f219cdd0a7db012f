"""Run a model on one image and draw its prediction, with the library's own inferencer.

    python tools/demo/image_demo.py CONFIG CHECKPOINT IMAGE [--out-file OUT] [--device cpu|cuda]

The config's ``default_scope`` picks mmpretrain's ``ImageClassificationInferencer`` (class scores), mmseg's
``MMSegInferencer`` (label map) or mmdet's ``DetInferencer`` (boxes, labels, scores, masks). The drawn prediction is
written to OUT (default ``demo_out/<image name>.png``); the prediction is printed in one line. A checkpoint without
class names in its meta (e.g. a converted official file) is drawn with the classes of the config's test dataset.
A bad config, checkpoint or image ends with one line saying what to change (``--debug`` for the traceback).
"""
import argparse
import os.path as osp
from pathlib import Path
from typing import List, Optional, Union

import numpy as np

import mmcausal  # noqa: F401  (compatibility shims and registration before any model is built)
from mmcausal.apis import build_inferencer, infer_and_draw
from mmcausal.utils.cli import check_checkpoint_argument
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Run a model on one image and draw its prediction')
    parser.add_argument('config', help='config file (classification, segmentation or detection)')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('image', help='image file')
    parser.add_argument('--out-file', help='where to write the drawn prediction (default demo_out/<image>.png)')
    parser.add_argument('--device', default=None, help='cpu, cuda, cuda:1 ... (default: cuda if available)')
    parser.add_argument('--debug', action='store_true', help='show the full traceback of a bad input')
    args = parser.parse_args(argv)
    if not osp.isfile(args.config):
        parser.error(f'config not found: {args.config}')
    check_checkpoint_argument(parser, args.checkpoint)
    if not osp.isfile(args.image):
        parser.error(f'image not found: {args.image}')
    return args


def summary(result: Union[dict, np.ndarray]) -> str:
    """The prediction in one line: a classifier's class and score, a detector's count, a segmentor's labels."""
    if not isinstance(result, dict):
        return f'label map {tuple(result.shape)} with classes {np.unique(result).tolist()}'
    if 'pred_label' in result:
        return f"class {result['pred_label']} ({result.get('pred_class')}), score {result['pred_score']:.3f}"
    return f"{len(result['bboxes'])} detections, best score {max(result['scores'], default=0.):.3f}"


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    out_file = args.out_file or str(Path('demo_out') / f'{Path(args.image).stem}.png')
    with user_errors_end_in_one_line(args.debug or None):
        inferencer = build_inferencer(args.config, args.checkpoint, args.device)
        result = infer_and_draw(inferencer, args.image, out_file)
    print(summary(result))
    print(f'drawn prediction: {out_file}')


if __name__ == '__main__':
    main()
