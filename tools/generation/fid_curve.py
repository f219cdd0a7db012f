"""FID against training step for every checkpoint of a generation run (VisionLLaMA Table 10).

    python tools/generation/fid_curve.py CONFIG RUN [RUN ...] --ref REF.npz --extractor inception[:WEIGHTS]|judge:CKPT \
        --num-samples N --out DIR [--label NAME] [--ref-stats auto|npz|images] [--batch-size 32]
        [--eval-batch-size 100] [--splits 10] [--kid-subset-size 1000] [--cfg-options KEY=VALUE ...]

RUN is a work dir (every ``iter_<step>.pth`` in it) or checkpoint files. Each checkpoint is sampled with the config's
``model.test_cfg`` (override it with ``--cfg-options model.test_cfg.sampler=ode ...``; Table 10 uses SiT's 250-step
ODE sampler): N samples (labels by its ``label_rule``) into ``DIR/samples/iter_<step>/`` (resumable, as
``tools/generation/sample.py``), evaluated as ``tools/generation/evaluate.py`` does (FID, sFID, IS, precision /
recall, KID; no memorisation check) against REF (ADM's ``VIRTUAL_imagenet256_labeled.npz`` for ImageNet: FID from
its stored statistics). Writes ``DIR/fid_curve.csv``, ``.md`` (Table 10's layout, then every metric per step),
``.json`` and ``.png`` (FID against the step). Runs on the GPU when there is one.
"""
import argparse
from typing import List, Optional

import torch
from mmengine.config import DictAction

import mmcausal  # noqa: F401  (applies mmcausal.compat and registers mmcausal)
from mmcausal.analysis.fid_curve import evaluate_checkpoints, run_checkpoints, write_curve
from mmcausal.analysis.inputs import positive_int
from mmcausal.evaluation import load_reference
from mmcausal.evaluation.fidelity import ADM_IS_SPLITS, KID_SUBSET_SIZE
from mmcausal.evaluation.generation_report import REF_STATS
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config')
    parser.add_argument('runs', nargs='+', help='work dirs (their iter_<step>.pth) or checkpoint files of one run')
    parser.add_argument('--ref', required=True, help='reference real images, ADM .npz (optionally with mu / sigma)')
    parser.add_argument('--extractor', required=True,
                        help='inception:WEIGHTS (torch-fidelity\'s TF-Inception file), inception, or judge:CKPT')
    parser.add_argument('--num-samples', type=positive_int, required=True, help='samples per checkpoint')
    parser.add_argument('--out', required=True, help='folder of the samples, the table and the plot')
    parser.add_argument('--label', help='the run\'s name in the table and the plot (default: the config\'s name)')
    parser.add_argument('--ref-stats', choices=REF_STATS, default='auto', help='as in tools/generation/evaluate.py')
    parser.add_argument('--batch-size', type=positive_int, default=32, help='samples per generator forward')
    parser.add_argument('--eval-batch-size', type=positive_int, default=100, help='images per extractor forward')
    parser.add_argument('--splits', type=positive_int, default=ADM_IS_SPLITS, help='Inception Score splits')
    parser.add_argument('--kid-subset-size', type=positive_int, default=KID_SUBSET_SIZE, help='KID subset size')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    with user_errors_end_in_one_line():
        cfg = read_config(args.config, args.cfg_options)
        checkpoints = run_checkpoints(args.runs)
        reference, stats = load_reference(args.ref, args.ref_stats, args.extractor.startswith('inception'))
        from mmcausal.evaluation import build_extractor  # imports torch-fidelity (a one-line error without it)
        extractor = build_extractor(args.extractor, device)
        rows = evaluate_checkpoints(cfg, checkpoints, args.out, args.num_samples, reference, extractor, stats,
                                    args.batch_size, args.eval_batch_size, args.splits, args.kid_subset_size, device)
        label = args.label or cfg.filename.rsplit('/', 1)[-1].rsplit('.', 1)[0]
        paths = write_curve(rows, args.out, label)
    print(open(paths['md'], encoding='utf-8').read())
    print('written: ' + ', '.join(paths.values()))


if __name__ == '__main__':
    main()
