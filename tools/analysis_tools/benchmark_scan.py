"""Selective scan on CPU: the chunked scan (mmcausal's default) vs the step-by-step recurrence under autograd
(``mamba_ssm``'s ``selective_scan_ref`` pattern), forward + backward.

    python tools/analysis_tools/benchmark_scan.py --shapes 2x197x1536 32x65x128 1x1025x1536 --chunks auto 16 64

Shapes are ``batch x tokens x channels`` (De-focus Mamba-B: 1536 channels, 197 tokens at 224 px; N = 16 states).
Each case runs in a fresh process: time is the median of ``--repeats`` forward + backward passes after one
warm-up, memory the process's peak resident set above the inputs (allocator-dependent, +-10 %).
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def measure(impl: str, shape: str, chunk: str, repeats: int) -> dict:
    import torch

    from mmcausal.models.backbones.defocus import chunked_selective_scan, sequential_selective_scan
    batch, length, channels = map(int, shape.split('x'))
    torch.manual_seed(0)
    operands = [torch.randn(batch, length, channels), torch.rand(batch, length, channels) * 0.1,
                -torch.arange(1., 17.).repeat(channels, 1), torch.randn(batch, length, 16),
                torch.randn(batch, length, 16)]
    operands = [t.requires_grad_() for t in operands]
    if impl == 'sequential':
        def scan():
            return sequential_selective_scan(*operands)
    else:
        def scan():
            return chunked_selective_scan(*operands, chunk_size=None if chunk == 'auto' else int(chunk))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        scan().square().mean().backward()
        times.append(time.perf_counter() - start)
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    return dict(time=statistics.median(times[1:]), peak_mib=peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--shapes', nargs='+', default=['2x197x1536', '32x65x128'])
    parser.add_argument('--chunks', nargs='+', default=['auto'], help='chunk sizes of the chunked scan ("auto")')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--measure', nargs=3, help=argparse.SUPPRESS)  # internal: one case in this process
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure, args.repeats)))
        return
    print('| shape (b x L x E) | scan | chunk | fwd+bwd (s) | peak MiB |')
    print('|---|---|---|---|---|')
    for shape in args.shapes:
        for impl, chunk in [('sequential', '-')] + [('chunked', chunk) for chunk in args.chunks]:
            out = subprocess.run([sys.executable, __file__, '--repeats', str(args.repeats), '--measure', impl, shape,
                                  chunk], capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            print(f'| {shape} | {impl} | {chunk} | {result["time"]:.3f} | {result["peak_mib"]:.0f} |', flush=True)


if __name__ == '__main__':
    main()
