"""Peak host memory and time of one backbone forward+backward at several input sizes (CPU).

Each size runs in a fresh process, so the peak resident set size (``ru_maxrss``) belongs to that size alone.
Memory that grows linearly with the number of tokens is the target: quadrupling the pixels (512 -> 1024)
should cost at most ~4-5x, while an explicit N x N attention matrix in a global block would cost 16x.

Example::

    python tools/analysis_tools/backbone_memory.py \
        configs/vision_llama/vitdet_mask-rcnn_vision-llama-base-p16_sfp_8xb8-lsj-36e_coco.py --sizes 512 1024
"""
import argparse
import json
import resource
import subprocess
import sys
import time

import torch


def measure(config: str, size: int, batch: int) -> dict:
    """Build ``model.backbone`` of ``config`` and time one training-mode forward+backward at ``size``."""
    from mmengine.config import Config
    from mmengine.registry import MODELS

    import mmcausal  # noqa: F401  (registers the backbones)
    cfg = Config.fromfile(config)
    backbone_cfg = cfg.model.backbone
    backbone_cfg.init_cfg = None
    torch.manual_seed(0)
    backbone = MODELS.build(backbone_cfg).train()
    images = torch.randn(batch, 3, size, size)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    outputs = backbone(images)
    sum(out.float().square().mean() for out in outputs).backward()
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return dict(size=size, batch=batch, peak_mib=peak / 1024, activation_mib=(peak - before) / 1024,
                seconds=seconds)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='config whose model.backbone is measured')
    parser.add_argument('--sizes', type=int, nargs='+', default=[512, 1024], help='square input sizes (pixels)')
    parser.add_argument('--batch', type=int, default=1)
    parser.add_argument('--single', action='store_true', help=argparse.SUPPRESS)  # one size, in a child process
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    if args.single:
        print(json.dumps(measure(args.config, args.sizes[0], args.batch)))
        return
    rows = []
    for size in args.sizes:
        child = subprocess.run([sys.executable, __file__, args.config, '--single', '--sizes', str(size),
                                '--batch', str(args.batch)], capture_output=True, text=True)
        if child.returncode:
            sys.exit(f'Measuring {size}px failed:\n{child.stderr.strip()[-2000:]}')
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    first = rows[0]
    print(f'{"size":>6} {"tokens x":>9} {"peak MiB":>10} {"x":>6} {"act. MiB":>10} {"x":>6} {"fwd+bwd s":>10}')
    for row in rows:
        print(f'{row["size"]:>6} {(row["size"] / first["size"]) ** 2:>9.2f} {row["peak_mib"]:>10.0f} '
              f'{row["peak_mib"] / first["peak_mib"]:>6.2f} {row["activation_mib"]:>10.0f} '
              f'{row["activation_mib"] / first["activation_mib"]:>6.2f} {row["seconds"]:>10.1f}')


if __name__ == '__main__':
    main()
