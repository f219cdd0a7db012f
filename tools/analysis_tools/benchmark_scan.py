"""Selective scan, forward + backward: the CPU kernel (mmcausal's default on CPU, built on first use), the Triton
kernels (the default on CUDA, ``--device cuda``), the chunked PyTorch scan (the fallback), the step-by-step recurrence
under autograd (``mamba_ssm``'s ``selective_scan_ref`` pattern), ``mamba_ssm``'s CUDA kernel (``pip install
mamba-ssm``) and mambapy's parallel scan (``pscan``, alxndrTL/mamba.py, ``pip install mambapy``: its
``selective_scan`` without the ``D`` skip).

    python tools/analysis_tools/benchmark_scan.py --shapes 2x197x1536 32x65x128 1x1025x1536 --chunks auto 16 64
    python tools/analysis_tools/benchmark_scan.py --impls cpu_kernel chunked mambapy --shapes 1x197x1536 8x4097x1536 \\
        --rounds 3 --memory-limit-gib 12
    python tools/analysis_tools/benchmark_scan.py --device cuda --impls triton chunked mamba_ssm \
        --shapes 8x197x1536 1x4097x1536 --repeats 10

Shapes are ``batch x tokens x channels`` (De-focus Mamba-B: 1536 channels, 197 tokens at 224 px; N = 16 states).
Each case runs in a fresh process: time is the median of ``--repeats`` forward + backward passes after one
warm-up, memory the process's peak resident set above the inputs (allocator-dependent, +-10 %; on CUDA the peak
of allocated GPU memory above the inputs). ``--rounds R``
runs every case R times, round-robin over the cases (the machine's drift reaches them all alike), and reports the
median time with its range and the median peak. ``--memory-limit-gib G`` caps what a case may allocate (its
address space above the start); a case that needs more is reported as out of memory instead of swapping or
taking the machine's memory from other jobs. ``checksum`` is the sum of the scan's output: the same inputs (seeded)
give the same value in every implementation.
"""
import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Optional, Tuple

IMPLS = ('sequential', 'chunked', 'cpu_kernel', 'triton', 'mamba_ssm', 'mambapy')
GPU_IMPLS = ('triton', 'mamba_ssm')


def mambapy_scan(u, delta, A, B, C):
    """mambapy's ``MambaBlock.selective_scan`` without the ``D`` skip: ``exp(delta A)`` and ``delta B u`` as
    ``(b, L, E, N)`` tensors, its ``pscan`` (Blelloch, length padded to a power of two), then ``h C``."""
    import torch
    from mambapy.pscan import pscan
    delta_a = torch.exp(delta.unsqueeze(-1) * A)
    delta_b_u = (delta.unsqueeze(-1) * B.unsqueeze(2)) * u.unsqueeze(-1)
    return (pscan(delta_a, delta_b_u) @ C.unsqueeze(-1)).squeeze(3)


def limit_memory(gib: Optional[float]) -> None:
    """Cap this process's address space at its current size plus ``gib`` GiB (None: no cap)."""
    if gib is None:
        return
    page = os.sysconf('SC_PAGE_SIZE')
    with open('/proc/self/statm') as statm:
        current = int(statm.read().split()[0]) * page
    resource.setrlimit(resource.RLIMIT_AS, (current + int(gib * 2**30), resource.RLIM_INFINITY))


def measure(impl: str, shape: str, chunk: str, repeats: int, memory_limit_gib: Optional[float] = None,
            device: str = 'cpu') -> dict:
    """One case in this process: ``{'time': s, 'peak_mib', 'checksum'}`` or ``{'out_of_memory': True}``."""
    import torch

    from mmcausal.models.defocus import selective_scan
    batch, length, channels = map(int, shape.split('x'))
    torch.manual_seed(0)
    operands = [torch.randn(batch, length, channels), torch.rand(batch, length, channels) * 0.1,
                -torch.arange(1., 17.).repeat(channels, 1), torch.randn(batch, length, 16),
                torch.randn(batch, length, 16)]
    operands = [t.to(device).requires_grad_() for t in operands]
    cuda = device.startswith('cuda')

    def scan():
        if impl == 'mambapy':
            return mambapy_scan(*operands)
        return selective_scan(*operands, impl=impl, chunk_size=None if chunk in ('auto', '-') else int(chunk))

    def synchronize():
        if cuda:
            torch.cuda.synchronize()

    limit_memory(memory_limit_gib)
    base = torch.cuda.memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    times, checksum = [], None
    try:
        for _ in range(repeats + 1):
            synchronize()
            start = time.perf_counter()
            y = scan()
            y.square().mean().backward()
            synchronize()
            times.append(time.perf_counter() - start)
            checksum = y.detach().double().sum().item()
            del y
    except (MemoryError, RuntimeError) as error:
        if isinstance(error, RuntimeError) and 'alloc' not in str(error):
            raise
        return dict(out_of_memory=True)
    peak = torch.cuda.max_memory_allocated() if cuda else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(time=statistics.median(times[1:]), peak_mib=(peak - base) / 2**20, checksum=checksum)


def summarise(runs: List[dict]) -> str:
    """One table cell from a case's rounds: median time (range), median peak, checksum; or out of memory."""
    if not runs:
        return 'failed'
    if any(run.get('out_of_memory') for run in runs):
        return 'out of memory'
    times = [run['time'] for run in runs]
    spread = f' ({min(times):.3f}-{max(times):.3f})' if len(runs) > 1 else ''
    return (f'{statistics.median(times):.3f} s{spread}, {statistics.median(run["peak_mib"] for run in runs):.0f} MiB'
            f', {runs[0]["checksum"]:.6g}')


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--shapes', nargs='+', default=['2x197x1536', '32x65x128'])
    parser.add_argument('--impls', nargs='+', default=['sequential', 'chunked', 'cpu_kernel'], choices=IMPLS,
                        help='scans to measure (mambapy: pip install mambapy)')
    parser.add_argument('--chunks', nargs='+', default=['auto'], help='chunk sizes of the chunked scan ("auto")')
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument('--rounds', type=int, default=1, help='measure every case this many times, round-robin')
    parser.add_argument('--memory-limit-gib', type=float, help='what one case may allocate (default: no cap)')
    parser.add_argument('--device', default='cpu', help='cpu or cuda (the triton and mamba_ssm scans need cuda)')
    parser.add_argument('--measure', nargs=3, help=argparse.SUPPRESS)  # internal: one case in this process
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeats < 1:
        parser.error('--rounds and --repeats must be at least 1')
    if args.memory_limit_gib is not None and args.memory_limit_gib <= 0:
        parser.error(f'--memory-limit-gib must be positive, got {args.memory_limit_gib}')
    if args.device == 'cpu' and set(args.impls) & set(GPU_IMPLS):
        parser.error(f'--impls {" ".join(sorted(set(args.impls) & set(GPU_IMPLS)))} run on --device cuda')
    if args.device != 'cpu' and 'cpu_kernel' in args.impls:
        parser.error('--impls cpu_kernel runs on --device cpu')
    if 'mambapy' in args.impls and importlib.util.find_spec('mambapy') is None:
        parser.error('--impls mambapy needs mambapy: pip install -r requirements/optional.txt')
    return args


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure, args.repeats, args.memory_limit_gib, args.device)))
        return
    cases = [(shape, impl, chunk) for shape in args.shapes for impl in args.impls
             for chunk in (args.chunks if impl == 'chunked' else ['-'])]
    runs: Dict[Tuple[str, str, str], List[dict]] = {case: [] for case in cases}
    limit = ['--memory-limit-gib', str(args.memory_limit_gib)] if args.memory_limit_gib is not None else []
    for _ in range(args.rounds):
        for case in cases:
            command = [sys.executable, __file__, '--repeats', str(args.repeats), *limit, '--device', args.device,
                       '--impls', case[1], '--measure', case[1], case[0], case[2]]
            child = subprocess.run(command, capture_output=True, text=True)
            if child.returncode:
                print(f'{case} failed:\n{child.stderr.strip()[-2000:]}', file=sys.stderr)
                continue
            runs[case].append(json.loads(child.stdout.strip().splitlines()[-1]))
            print(f'measured {case}', file=sys.stderr, flush=True)
    print('| shape (b x L x E) | scan | chunk | fwd+bwd (range), peak, checksum |')
    print('|---|---|---|---|')
    for (shape, impl, chunk), measured in runs.items():
        print(f'| {shape} | {impl} | {chunk} | {summarise(measured)} |')


if __name__ == '__main__':
    main()
