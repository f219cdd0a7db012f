"""Time (and on CUDA, peak memory of) the attention mask modes at several sequence lengths.

    python tools/analysis_tools/benchmark_attention.py [--device cpu|cuda] [--dtype float32|bfloat16]
        [--tokens 197 1025 4097] [--batch 2] [--heads 12] [--head-dim 64] [--repeats 5]
        [--cases bidirectional:0 causal:0 causal:0.5 official:0 official:0.5]

Each row is one forward + backward of :func:`mmcausal.models.layers.masked_attention` on random
``(B, heads, N, head_dim)`` q/k/v. ``causal`` at alpha = 0 and ``bidirectional`` use SDPA's fused kernels;
``causal`` with 0 < alpha < 1 uses SDPA with an (N, N) float bias; ``official`` at alpha < 1 uses one SDPA call
over every key twice with an (N, 2N) float bias (:func:`mmcausal.models.layers.soft_mask_attention`).
``x bidir`` is a row's time over that of ``bidirectional`` at the same length (when that case is chosen): the share
of the full attention's time a mode costs, e.g. 0.5 for a causal kernel that computes exactly the unmasked half of
the scores, about 2 for ``official`` at alpha < 1 (it attends over 2N keys). Rows print as they are measured;
a repeated case is measured once.
"""
import argparse
import time
from typing import Dict, List, Optional, Tuple

import torch

from mmcausal.models.layers import MASK_MODES, masked_attention

BIDIRECTIONAL = ('bidirectional', 0.)  # the reference of the ``x bidir`` column
CASES: List[Tuple[str, float]] = [BIDIRECTIONAL, ('causal', 0.), ('causal', 0.5), ('official', 0.),
                                  ('official', 0.5)]


def parse_case(text: str) -> Tuple[str, float]:
    """``'mode:alpha'`` (or ``'mode'``, alpha 0) -> ``(mode, alpha)``, for ``--cases``; ``bidirectional`` ignores
    alpha, so its alpha is always 0."""
    mode, _, alpha = text.partition(':')
    if mode not in MASK_MODES:
        raise argparse.ArgumentTypeError(f'unknown mask mode {mode!r} in {text!r}; choose from {list(MASK_MODES)}')
    try:
        rate = float(alpha or 0.)
    except ValueError:
        rate = -1.
    if not 0. <= rate <= 1.:
        raise argparse.ArgumentTypeError(f'expected MODE or MODE:ALPHA with 0 <= ALPHA <= 1 (e.g. causal:0.5), '
                                         f'got {text!r}')
    return mode, 0. if mode == 'bidirectional' else rate


def measure(mode: str, alpha: float, shape: Tuple[int, ...], device: str, dtype: torch.dtype,
            repeats: int) -> Dict[str, float]:
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))

    def step() -> None:
        masked_attention(q, k, v, mode, alpha).sum().backward()

    step()  # warm-up
    if device == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    if device == 'cuda':
        torch.cuda.synchronize()
    result = dict(ms=(time.perf_counter() - start) / repeats * 1e3)
    if device == 'cuda':
        result['peak_mib'] = torch.cuda.max_memory_allocated() / 2**20
    return result


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--dtype', default='float32', choices=['float32', 'bfloat16', 'float16'])
    parser.add_argument('--tokens', type=int, nargs='+', default=[197, 1025, 4097])
    parser.add_argument('--batch', type=int, default=2)
    parser.add_argument('--heads', type=int, default=12)
    parser.add_argument('--head-dim', type=int, default=64)
    parser.add_argument('--repeats', type=int, default=5)
    parser.add_argument('--cases', type=parse_case, nargs='+', default=CASES, metavar='MODE[:ALPHA]',
                        help='mask modes and soft-mask rates to time (default: every case)')
    args = parser.parse_args(argv)
    cases = list(dict.fromkeys(args.cases))
    dtype = getattr(torch, args.dtype)
    print(f'device={args.device} dtype={args.dtype} batch={args.batch} heads={args.heads} '
          f'head_dim={args.head_dim} (forward + backward)')
    header = f'{"tokens":>7} {"mode":>14} {"alpha":>5} {"ms":>10} {"x bidir":>8}'
    print(header + (f' {"peak MiB":>10}' if args.device == 'cuda' else ''))
    for tokens in args.tokens:
        shape = (args.batch, args.heads, tokens, args.head_dim)
        # the reference row is timed first, so every row can print its ratio as soon as it is measured
        reference = measure(*BIDIRECTIONAL, shape, args.device, dtype, args.repeats) if BIDIRECTIONAL in cases else None
        for mode, alpha in cases:
            row = reference if (mode, alpha) == BIDIRECTIONAL else measure(mode, alpha, shape, args.device, dtype,
                                                                            args.repeats)
            ratio = f'{row["ms"] / reference["ms"]:>8.3f}' if reference else f'{"-":>8}'
            line = f'{tokens:>7} {mode:>14} {alpha:>5.2f} {row["ms"]:>10.1f} {ratio}'
            if 'peak_mib' in row:
                line += f' {row["peak_mib"]:>10.1f}'
            print(line, flush=True)


if __name__ == '__main__':
    main()
