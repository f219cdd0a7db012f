"""Generate the synthetic shapes datasets (ImageNet-, ADE20K-, COCO-like, captions, ...) used by configs and tests.

Usage, from the repository root::

    python tools/dataset_converters/make_shapes_datasets.py --out data/shapes [--seed 0] \
        [--which imagenet ade20k coco cue-conflict cifar10 cifar100 captions] [--style v1|v2|v3] [--coco-val N] \
        [--cue-conflict-per-pair N]

writes ``<out>/imagenet``, ``<out>/ade20k`` and ``<out>/coco`` with the default sizes of :mod:`mmcausal.datasets.shapes`
(``--coco-val`` sets the COCO validation images: the twin-transfer test draws 48); ``--which cue-conflict`` writes
``<out>/cue-conflict``, the shapes classes' cue-conflict images in the layout of Geirhos et al.'s set
(:mod:`mmcausal.datasets.shapes.cue_conflict`, read by ``tools/analysis_tools/shape_bias.py``;
``--cue-conflict-per-pair`` images per ordered class pair), drawn only on request, as are ``--which cifar10`` /
``cifar100``: ``<out>/cifar10/cifar-10-batches-py`` and ``<out>/cifar100/cifar-100-python``, the python files of
CIFAR-10 / CIFAR-100 holding 32 px shape images (:mod:`mmcausal.datasets.shapes.cifar`, read by mmcausal's
``UncheckedCIFAR10`` / ``UncheckedCIFAR100``), and ``--which captions``: ``<out>/captions``, captioned images of 1-3
shapes for contrastive image-text pre-training as an image folder with ``.txt`` captions, OpenCLIP tsv files,
webdataset shards and mmpretrain ann files (:mod:`mmcausal.datasets.shapes.captions`, read by mmcausal's
``ImageTextDataset`` / ``WebDatasetImageText``). ``--style v2`` / ``v3`` draw the independent second and third styles
(see :mod:`mmcausal.datasets.shapes.styles`). Datasets already generated with the same parameters are left as they are.

The generator package is loaded from its folder with :mod:`importlib` instead of ``import mmcausal...``:
importing the package runs ``mmcausal/__init__.py``, which imports torch and the OpenMMLab libraries.
Loading the package alone needs only numpy and Pillow, so this script also works in a minimal environment
and from any working directory.
"""
import argparse
import importlib
import importlib.util
import os.path as osp
import sys
from functools import partial
from types import ModuleType
from typing import List, Optional

SHAPES_DIR = osp.normpath(osp.join(osp.dirname(osp.abspath(__file__)), '..', '..', 'mmcausal', 'datasets', 'shapes'))
STANDALONE_NAME = 'mmcausal_shapes_standalone'
DATASETS = ('imagenet', 'ade20k', 'coco')
#: sets drawn only on request
EXTRA_DATASETS = ('cue-conflict', 'cifar10', 'cifar100', 'captions')


def load_shapes_module() -> ModuleType:
    """Load the package ``mmcausal/datasets/shapes`` by path, without running ``mmcausal/__init__.py``."""
    if STANDALONE_NAME in sys.modules:
        return sys.modules[STANDALONE_NAME]
    spec = importlib.util.spec_from_file_location(STANDALONE_NAME, osp.join(SHAPES_DIR, '__init__.py'),
                                                  submodule_search_locations=[SHAPES_DIR])
    module = importlib.util.module_from_spec(spec)
    sys.modules[STANDALONE_NAME] = module  # its relative imports look the package up here
    spec.loader.exec_module(module)
    return module


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', default='data/shapes', help='output folder (default: data/shapes)')
    parser.add_argument('--seed', type=int, default=0, help='random seed (default: 0)')
    parser.add_argument('--which', nargs='+', choices=DATASETS + EXTRA_DATASETS, default=list(DATASETS),
                        help='datasets to generate (default: imagenet ade20k coco; cue-conflict, cifar10, cifar100, '
                             'captions on request)')
    parser.add_argument('--style', choices=('v1', 'v2', 'v3'), default='v1',
                        help='v1: the embedded data (default); v2, v3: independent draws with other statistics')
    parser.add_argument('--coco-val', type=int, default=16, help='COCO validation images (default: 16)')
    parser.add_argument('--cue-conflict-per-pair', type=int, default=10,
                        help='cue-conflict images per ordered pair of classes (default: 10, 160 images)')
    args = parser.parse_args(argv)
    if args.coco_val < 1:
        parser.error(f'--coco-val must be at least 1 (the COCO validation images), got {args.coco_val}')
    if args.cue_conflict_per_pair < 1:
        parser.error(f'--cue-conflict-per-pair must be at least 1, got {args.cue_conflict_per_pair}')
    return args


def describe(name: str, summary: dict) -> str:
    """Return the one-line summary printed for a generated dataset."""
    counts = summary['num_images']
    splits = ', '.join(f'{split} {n}' for split, n in counts.items()) if isinstance(counts, dict) else str(counts)
    line = f'{name}: {summary["root"]} | images: {splits}'
    if 'num_instances' in summary:
        instances = ', '.join(f'{split} {n}' for split, n in summary['num_instances'].items())
        line += f' | instances: {instances}'
    return f'{line} | classes: {", ".join(summary["classes"])}'


def main(argv: Optional[List[str]] = None) -> None:
    """Generate the requested datasets under ``--out`` and print one line per dataset."""
    args = parse_args(argv)
    shapes = load_shapes_module()
    cue_conflict = importlib.import_module(f'{STANDALONE_NAME}.cue_conflict')
    makers = {'imagenet': shapes.make_imagenet_like, 'ade20k': shapes.make_ade20k_like,
              'coco': shapes.make_coco_like, 'cue-conflict': cue_conflict.make_cue_conflict_like,
              'cifar10': partial(shapes.make_cifar_like, variant='cifar10'),
              'cifar100': partial(shapes.make_cifar_like, variant='cifar100'),
              'captions': shapes.make_captioned_like}
    for name in args.which:
        sizes = dict(coco=dict(num_val=args.coco_val),
                     **{'cue-conflict': dict(num_per_pair=args.cue_conflict_per_pair)}).get(name, {})
        summary = makers[name](osp.join(args.out, name), seed=args.seed, style=args.style, **sizes)
        print(describe(name, summary))


if __name__ == '__main__':
    main(sys.argv[1:])
