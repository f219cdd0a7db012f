"""Compile the Triton selective-scan kernels ahead of time for GPU architectures, without a GPU, and report what
each compiled kernel uses: registers per thread, stack (local memory: registers spilled), shared memory.

    python tools/analysis_tools/triton_scan_resources.py
    python tools/analysis_tools/triton_scan_resources.py --archs 90 --dtypes fp32 --num-warps 1 2 4 8 --json

Triton lowers each kernel to PTX and runs ``ptxas`` (both ship with triton), as it does on first use on a GPU host,
so a kernel that would not compile there fails here; ``cuobjdump`` (also shipped) reads the resources off the
cubin. Each kernel is compiled anew (a temporary Triton cache), so ``compile_s`` is the compile time on first use.
The kernels are compiled with the options :mod:`mmcausal.models.defocus.scans.triton` launches them
with (its ``launch_options`` for ``N = --states``; ``--num-warps`` replaces the launched warps) and the dtypes
it launches (fp32, and fp64 for fp64 inputs). Run without ``TRITON_INTERPRET`` (the tests set it without a GPU):
the tool removes it and restarts itself if it is set.
"""
import argparse
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

KERNELS = ('forward', 'backward')
DTYPES = ('fp32', 'fp64')


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--archs', type=int, nargs='+', default=[80, 90],
                        help='CUDA compute capabilities as major * 10 + minor (80: A100, 90: H100 / H200)')
    parser.add_argument('--dtypes', nargs='+', choices=DTYPES, default=list(DTYPES))
    parser.add_argument('--num-warps', type=int, nargs='+', default=None,
                        help='warps per program (default: the one the ops launch with)')
    parser.add_argument('--states', type=int, default=16, help='N, the SSM state size (BLOCK_N: next power of 2)')
    parser.add_argument('--json', action='store_true', help='one JSON list of rows instead of a table')
    return parser.parse_args(argv)


def signature(kernel, dtype: str) -> Dict[str, str]:
    """Triton's signature of a kernel as the ops call it: ``*_ptr`` tensors of ``dtype``, ``tl.constexpr``
    parameters as constants, the sizes as 32-bit integers."""
    import triton.language as tl
    types = {}
    for name, parameter in inspect.signature(kernel).parameters.items():
        if parameter.annotation is tl.constexpr:
            types[name] = 'constexpr'
        else:
            types[name] = f'*{dtype}' if name.endswith('_ptr') else 'i32'
    return types


def resources(cubin: bytes, cuobjdump: Path) -> Dict[str, int]:
    """``{'registers', 'stack_bytes', 'shared_bytes'}`` of a one-kernel cubin, from ``cuobjdump``."""
    with tempfile.NamedTemporaryFile(suffix='.cubin') as file:
        file.write(cubin)
        file.flush()
        usage = subprocess.run([str(cuobjdump), '--dump-resource-usage', file.name], capture_output=True, text=True,
                               check=True).stdout
    fields = dict(re.findall(r'\b(REG|STACK|SHARED):(\d+)', usage))
    return dict(registers=int(fields['REG']), stack_bytes=int(fields['STACK']), shared_bytes=int(fields['SHARED']))


def compile_rows(args: argparse.Namespace) -> List[dict]:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from mmcausal.models.defocus.scans import triton as triton_scan
    from mmcausal.models.defocus.scans import triton_kernels as triton_scan_kernels
    cuobjdump = Path(triton.__file__).parent / 'backends' / 'nvidia' / 'bin' / 'cuobjdump'
    constants = triton_scan.launch_options(args.states)
    launched_warps = constants.pop('num_warps')
    rows = []
    for name in KERNELS:
        kernel = getattr(triton_scan_kernels, f'selective_scan_{name}')
        for dtype in args.dtypes:
            for arch in args.archs:
                for num_warps in args.num_warps or [launched_warps]:
                    source = ASTSource(fn=triton.jit(kernel), signature=signature(kernel, dtype),
                                       constexprs=constants)
                    start = time.perf_counter()
                    compiled = triton.compile(source, target=GPUTarget('cuda', arch, 32),
                                              options=dict(num_warps=num_warps))
                    rows.append(dict(kernel=name, dtype=dtype, arch=f'sm_{arch}', num_warps=num_warps,
                                     **resources(compiled.asm['cubin'], cuobjdump),
                                     compile_s=round(time.perf_counter() - start, 2)))
    return rows


def main(argv=None) -> None:
    if os.environ.get('TRITON_INTERPRET'):  # Triton decides at import whether it compiles: a clean process
        environment = {key: value for key, value in os.environ.items() if key != 'TRITON_INTERPRET'}
        sys.exit(subprocess.run([sys.executable, __file__, *(sys.argv[1:] if argv is None else argv)],
                                env=environment).returncode)
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        os.environ['TRITON_CACHE_DIR'] = cache  # compile every kernel (timed), leave nothing behind
        try:
            import triton  # noqa: F401
        except ImportError:
            sys.exit('triton is missing: it ships with the CUDA builds of torch on Linux (tools/setup_env.sh '
                     'installs it).')
        rows = compile_rows(args)
    if args.json:
        print(json.dumps(rows))
        return
    columns = list(rows[0])
    print(' | '.join(columns))
    for row in rows:
        print(' | '.join(str(row[column]) for column in columns))
    spilled = [row for row in rows if row['stack_bytes']]
    if spilled:
        print(f'{len(spilled)} of {len(rows)} kernels spill registers to the stack (local memory).')


if __name__ == '__main__':
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main()
