"""Write a reference batch (ADM ``.npz``: ``arr_0`` uint8 N x H x W x 3, ``arr_1`` labels) from an image folder.

    python tools/generation/make_reference_npz.py ROOT OUT.npz [--size 32]

ROOT holds one subfolder per class (sorted names = labels 0, 1, ..., as mmpretrain's folder scan), e.g.
``data/shapes/imagenet/train``. ``--size`` BOX-resizes every image to size x size, as the CPU twins' pipelines
(``Resize(..., backend='pillow', interpolation='box')``) do. The file is what ``tools/generation/evaluate.py --ref``
and the ADM evaluator read.
"""
import argparse
import sys
from typing import List, Optional

from mmcausal.evaluation import images_from_class_folders, save_sample_npz
from mmcausal.utils.error_report import user_errors_end_in_one_line


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('root', help='folder of class subfolders of images')
    parser.add_argument('out', help='the .npz to write')
    parser.add_argument('--size', type=int, help='BOX-resize the images to size x size (default: keep)')
    args = parser.parse_args(argv)
    with user_errors_end_in_one_line():
        images, labels, classes = images_from_class_folders(args.root, args.size)
    save_sample_npz(args.out, images, labels)
    print(f'{args.out}: {len(images)} images {images.shape[1]}x{images.shape[2]}, classes {", ".join(classes)}')


if __name__ == '__main__':
    main(sys.argv[1:])
