"""Evaluate generated samples offline with torch-fidelity: FID, sFID, Inception Score, KID, k-NN precision / recall,
a judge's accuracy against the conditioning labels and a memorisation check.

    python tools/generation/evaluate.py SAMPLES.npz --ref REF.npz --extractor judge:CKPT|inception[:WEIGHTS] \
        [--ref-stats auto|npz|images] [--holdout VAL.npz] [--k 3] [--splits 10] [--kid-subset-size 1000] \
        [--batch-size 100] [--device cpu|cuda] [--memorisation pixels|features|none] [--out-json FILE]

SAMPLES.npz and REF.npz are in the ADM layout (``arr_0`` uint8 N x H x W x 3, optional ``arr_1`` labels): what
``tools/generation/sample.py`` writes, ``tools/generation/make_reference_npz.py`` for a real image folder, or ADM's
reference batch (``VIRTUAL_imagenet256_labeled.npz``, which also stores the Inception statistics ``mu`` / ``sigma``
and ``mu_s`` / ``sigma_s`` that the paper's FID and sFID are measured against). Extractors (torch-fidelity's
registry):

* ``inception:WEIGHTS`` -- the TF FID Inception-v3 the ADM evaluator runs, as ported by torch-fidelity
  (``inception-v3-compat``; WEIGHTS = its ``weights-inception-2015-12-05-6726825d.pth``, copied to machines without
  internet); ``inception`` alone lets torch-fidelity download that file. FID / KID / P/R on pool_3, sFID on ADM's
  ``mixed_6/conv`` map, IS on the logits over 10 splits, as ADM. With ``--ref-stats auto`` (default) FID / sFID are
  measured against the reference file's stored statistics when it has them (ADM's reference batch), otherwise
  against its images; ``npz`` insists on the stored ones, ``images`` ignores them.
* ``judge:CKPT`` -- an mmpretrain classifier checkpoint written by ``tools/train.py`` (the CPU twins' JudgeCNN,
  ``configs/generation_judge/``): the same metrics in its feature space, and its accuracy on labelled samples.

The memorisation check compares the median distance of each sample to its nearest reference image with the same for
``--holdout`` real images (else for each reference image to its nearest other one), in pixel space ([-1, 1]; default)
or, with ``--memorisation features``, in the extractor's pooled features (use it, or ``none``, for 256 px images).
The ADM TF evaluator's command for the same files is printed at the end.
"""
import argparse
import json
import os
import sys
from typing import List, Optional

from mmcausal.evaluation import SampleFileError, evaluate_generation, load_reference, load_sample_npz
from mmcausal.evaluation.fidelity import ADM_IS_SPLITS, KID_SUBSET_SIZE
from mmcausal.evaluation.generation_report import MEMORISATION_SPACES, REF_STATS
from mmcausal.utils.error_report import DEBUG_ENV, user_errors_end_in_one_line
from mmcausal.utils.errors import UserInputError

ADM_EVALUATOR = 'https://github.com/openai/guided-diffusion/tree/main/evaluations'


class EvaluateArgumentError(UserInputError, ValueError):
    """An option of evaluate.py does not fit the given files."""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('samples', help='generated samples, ADM .npz (arr_0 images, optional arr_1 labels)')
    parser.add_argument('--ref', required=True, help='reference real images, ADM .npz of the same image size')
    parser.add_argument('--extractor', required=True, help='judge:CKPT (tools/train.py checkpoint of a classifier), '
                        'inception:WEIGHTS (torch-fidelity\'s TF-Inception file) or inception (downloads that file)')
    parser.add_argument('--ref-stats', choices=REF_STATS, default='auto',
                        help='FID / sFID against the mu / sigma (mu_s / sigma_s) stored in --ref (npz), against its '
                        'images (images), or the stored ones where the extractor is Inception and they exist (auto)')
    parser.add_argument('--holdout', help='held-out real images (.npz) for the memorisation reference distances')
    parser.add_argument('--k', type=int, default=3, help='neighbours of the precision / recall manifolds (ADM: 3)')
    parser.add_argument('--splits', type=int, default=ADM_IS_SPLITS, help='Inception Score splits (ADM: 10)')
    parser.add_argument('--kid-subset-size', type=int, default=KID_SUBSET_SIZE,
                        help='KID subset size (capped at the number of samples and of reference images)')
    parser.add_argument('--batch-size', type=int, default=100, help='images per extractor forward')
    parser.add_argument('--device', default='cpu', help='device of the extractor (cpu or cuda)')
    parser.add_argument('--memorisation', choices=MEMORISATION_SPACES, default='pixels',
                        help='space of the nearest-neighbour memorisation check (default: pixels, the twins\' check; '
                        'features: the extractor\'s pooled features, cheap for large images; none: skip it)')
    parser.add_argument('--out-json', help='also write the metrics to this JSON file')
    parser.add_argument('--debug', action='store_true', help='full tracebacks for bad input')
    return parser.parse_args(argv)


def format_report(metrics: dict, extractor: str, k: int, memorisation: str = 'pixels') -> str:
    """The printed table of ``metrics`` (from :func:`evaluate_generation`)."""
    space = 'Inception' if extractor.startswith('inception') else 'judge'
    lines = [f'FD ({space} features): {metrics["fd"]:.4f}', f'sFID ({space} spatial features): {metrics["sfid"]:.4f}',
             f'Inception Score ({space} classes): {metrics["inception_score"]:.4f} '
             f'(std {metrics["inception_score_std"]:.4f})',
             f'KID ({space} features): {metrics["kid"]:.6f} (std {metrics["kid_std"]:.6f})',
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
        reference, stats = load_reference(args.ref, args.ref_stats, args.extractor.startswith('inception'))
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
        if args.kid_subset_size < 2:
            raise EvaluateArgumentError(f'--kid-subset-size must be at least 2, got {args.kid_subset_size}.')
        from mmcausal.evaluation import build_extractor  # imports torch-fidelity (a one-line error without it)
        extractor = build_extractor(args.extractor, args.device)
        metrics = evaluate_generation(samples, reference, extractor, labels=labels, holdout=holdout, k=args.k,
                                      splits=args.splits, batch_size=args.batch_size,
                                      memorisation_space=args.memorisation, reference_stats=stats,
                                      kid_subset_size=args.kid_subset_size)
    labelled = 'labelled' if labels is not None else 'no labels'
    stored = sorted(stats) if stats else []
    print(f'samples: {len(samples)} x {samples.shape[1]}x{samples.shape[2]} ({labelled}) | reference: '
          f'{len(reference)} images{", statistics " + "/".join(stored) + " of the file" if stored else ""} | '
          f'extractor: {args.extractor}')
    print(format_report(metrics, args.extractor, args.k, args.memorisation))
    if args.out_json:
        with open(args.out_json, 'w') as file:
            json.dump(metrics, file, indent=2)
    print(adm_command(args.ref, args.samples))


if __name__ == '__main__':
    main(sys.argv[1:])
