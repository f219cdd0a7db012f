"""Evaluate generated samples offline: Fréchet distance, sFID, Inception Score, k-NN precision / recall, a judge's
accuracy against the conditioning labels and a memorisation check.

    python tools/generation/evaluate.py SAMPLES.npz --ref REF.npz --extractor judge:CKPT|inception:PATH \
        [--holdout VAL.npz] [--k 3] [--splits 1] [--batch-size 100] [--device cpu] [--out-json FILE]

SAMPLES.npz and REF.npz are in the ADM layout (``arr_0`` uint8 N x H x W x 3, optional ``arr_1`` labels): what
``tools/generation/sample.py`` writes, and ``tools/generation/make_reference_npz.py`` for a real image folder.
Extractors (nothing is downloaded):

* ``judge:CKPT`` -- an mmpretrain classifier checkpoint written by ``tools/train.py`` (the CPU twins' JudgeCNN,
  ``configs/generation_judge/``): FD / precision / recall on its pooled features, its accuracy on labelled samples.
* ``inception:PATH`` -- torchvision's Inception-v3 weights file (``inception_v3_google-0cc3c7bd.pth``) copied to PATH:
  FID-style numbers for comparing runs here. They are not the paper's TF-Inception numbers; the command of the ADM
  evaluator that gives those is printed at the end.

The memorisation check compares the median distance of each sample to its nearest reference image with the same for
``--holdout`` real images (else for each reference image to its nearest other one), in pixel space ([-1, 1]; default)
or, with ``--memorisation features``, in the extractor's pooled features (cheap for 256 px images).
"""
import argparse
import json
import os
import sys
from typing import List, Optional

from mmcausal.evaluation import SampleFileError, build_extractor, evaluate_generation, load_sample_npz
from mmcausal.evaluation.generation_report import MEMORISATION_SPACES
from mmcausal.utils.cli import DEBUG_ENV, user_errors_end_in_one_line
from mmcausal.utils.errors import UserInputError

ADM_EVALUATOR = 'https://github.com/openai/guided-diffusion/tree/main/evaluations'


class EvaluateArgumentError(UserInputError, ValueError):
    """An option of evaluate.py does not fit the given files."""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('samples', help='generated samples, ADM .npz (arr_0 images, optional arr_1 labels)')
    parser.add_argument('--ref', required=True, help='reference real images, ADM .npz of the same image size')
    parser.add_argument('--extractor', required=True, help='judge:CKPT (tools/train.py checkpoint of a classifier) '
                        'or inception:PATH (local torchvision inception_v3 weights)')
    parser.add_argument('--holdout', help='held-out real images (.npz) for the memorisation reference distances')
    parser.add_argument('--k', type=int, default=3, help='neighbours of the precision / recall manifolds (ADM: 3)')
    parser.add_argument('--splits', type=int, default=1, help='Inception Score splits (ADM: N / 5000)')
    parser.add_argument('--batch-size', type=int, default=100, help='images per extractor forward')
    parser.add_argument('--device', default='cpu', help='device of the extractor (e.g. cuda)')
    parser.add_argument('--memorisation', choices=MEMORISATION_SPACES, default='pixels',
                        help='space of the nearest-neighbour memorisation check (default: pixels, the twins\' check; '
                        'features: the extractor\'s pooled features, cheap for large images; none: skip it)')
    parser.add_argument('--out-json', help='also write the metrics to this JSON file')
    parser.add_argument('--debug', action='store_true', help='full tracebacks for bad input')
    return parser.parse_args(argv)


def format_report(metrics: dict, extractor: str, k: int, memorisation: str = 'pixels') -> str:
    """The printed table of ``metrics`` (from :func:`evaluate_generation`)."""
    space = 'Inception' if extractor.startswith('inception:') else 'judge'
    lines = [f'FD ({space} features): {metrics["fd"]:.4f}', f'sFID ({space} spatial features): {metrics["sfid"]:.4f}',
             f'Inception Score ({space} classes): {metrics["inception_score"]:.4f}',
             f'precision / recall (k={k}): {metrics["precision"]:.4f} / {metrics["recall"]:.4f}']
    if 'accuracy' in metrics:
        lines.append(f'judge accuracy on the conditioning labels: {metrics["accuracy"]:.4f}')
    if 'nn_ratio' in metrics:
        where = 'pixel' if memorisation == 'pixels' else f'{space} feature'
        lines.append(f'memorisation ({where} L2): median NN samples->ref {metrics["median_nn_samples"]:.3f}, real '
                     f'{metrics["median_nn_reference"]:.3f}, ratio {metrics["nn_ratio"]:.3f}, copies '
                     f'{metrics["copy_fraction"]:.3f}')
    return '\n'.join(lines)


def adm_command(ref: str, samples: str) -> str:
    """The ADM TF evaluator's command for numbers comparable to the paper (run in its own TensorFlow env, from its
    clone: the paths are absolute)."""
    return (f'For numbers comparable to the paper, run the ADM TF evaluator ({ADM_EVALUATOR}) in a clone of '
            'openai/guided-diffusion, in its own env (pip install -r evaluations/requirements.txt: TensorFlow; it '
            'downloads its Inception graph on first use); for ImageNet the reference is its '
            'VIRTUAL_imagenet256_labeled.npz, which holds the paper\'s statistics:\n'
            f'  python evaluations/evaluator.py {os.path.abspath(ref)} {os.path.abspath(samples)}')


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.debug:
        os.environ[DEBUG_ENV] = '1'
    with user_errors_end_in_one_line():
        samples, labels = load_sample_npz(args.samples)
        reference, _ = load_sample_npz(args.ref)
        holdout = None if args.holdout is None else load_sample_npz(args.holdout)[0]
        for name, images in (('--ref', reference), ('--holdout', holdout)):
            if images is not None and images.shape[1:] != samples.shape[1:]:
                raise SampleFileError(f'{name} images are {images.shape[1]}x{images.shape[2]} but the samples '
                                      f'{samples.shape[1]}x{samples.shape[2]}; write the reference at the samples\' '
                                      'size (tools/generation/make_reference_npz.py --size).')
        if not 1 <= args.k < min(len(samples), len(reference)):
            raise EvaluateArgumentError(f'--k must be at least 1 and below the number of samples and of reference '
                                        f'images ({len(samples)}, {len(reference)}), got {args.k}.')
        if not 1 <= args.splits <= len(samples):
            raise EvaluateArgumentError(f'--splits must be in [1, {len(samples)}] (the number of samples), got '
                                        f'{args.splits}.')
        extractor = build_extractor(args.extractor, args.device)
        metrics = evaluate_generation(samples, reference, extractor, labels=labels, holdout=holdout, k=args.k,
                                      splits=args.splits, batch_size=args.batch_size,
                                      memorisation_space=args.memorisation)
    labelled = 'labelled' if labels is not None else 'no labels'
    print(f'samples: {len(samples)} x {samples.shape[1]}x{samples.shape[2]} ({labelled}) | reference: '
          f'{len(reference)} | extractor: {args.extractor}')
    print(format_report(metrics, args.extractor, args.k, args.memorisation))
    if args.out_json:
        with open(args.out_json, 'w') as file:
            json.dump(metrics, file, indent=2)
    print(adm_command(args.ref, args.samples))


if __name__ == '__main__':
    main(sys.argv[1:])
