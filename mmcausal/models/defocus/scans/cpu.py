"""The selective scan's CPU kernel: ``csrc/selective_scan_cpu.cpp``, built on first use by torch's C++ extension
builder (``torch.utils.cpp_extension.load``; it needs the C++ compiler that also builds mmcv) and cached under
``TORCH_EXTENSIONS_DIR`` (default ``~/.cache/torch_extensions``). ``tools/setup_env.sh`` builds it once.

One pass over the tokens per block of channels, with the block's states in registers: forward and backward each
read and write a state once per token (the chunked PyTorch scan takes ~25 elementwise ops over the state per token).
It saves the inputs and the state after every :data:`SEGMENT` tokens, ``O(L (E + N) + L E N / SEGMENT)``; the
backward pass rebuilds one segment's states at a time. The ops are registered with ``torch.library`` (fake
implementations included), so ``torch.compile`` keeps them in its graph.
"""
import functools
import logging
import os
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import torch
from torch import Tensor

from mmcausal.utils.errors import UserInputError

SEGMENT = 32  # tokens between the states the forward pass keeps for the backward pass
SOURCE = Path(__file__).with_name('csrc') / 'selective_scan_cpu.cpp'
_SIMD_FLAGS = {
    'AVX2': ['-mavx2', '-mfma'],
    'AVX512': ['-mavx512f', '-mavx512bw', '-mavx512vl', '-mavx512dq', '-mfma'],
}


def compiler_flags(capability: str, platform: str = sys.platform) -> List[str]:
    """Flags for ATen's vector types at the CPU capability torch uses (``torch.backends.cpu.get_cpu_capability()``):
    AVX2 / AVX512 code where torch itself runs it, the portable ``DEFAULT`` vectors elsewhere; OpenMP, which ATen's
    ``parallel_for`` header needs where torch was built with it. Built and tested with gcc on Linux; Apple's clang
    has no ``-fopenmp`` (there the build can fail, and the chunked scan runs)."""
    if platform == 'win32':
        return ['/O2', '/openmp']
    simd = capability if capability in _SIMD_FLAGS else 'DEFAULT'
    flags = ['-O3', *(_SIMD_FLAGS.get(simd, [])), f'-DCPU_CAPABILITY={simd}', f'-DCPU_CAPABILITY_{simd}']
    return flags + ([] if platform == 'darwin' else ['-fopenmp'])


@functools.lru_cache(maxsize=None)
def cpu_scan_extension() -> Tuple[Optional[object], str]:
    """``(module, '')`` once the kernel is built and loaded, else ``(None, reason)`` (one line)."""
    logger = logging.getLogger('torch.utils.cpp_extension')
    level = logger.level
    logger.setLevel(logging.ERROR)  # its import warns that a CUDA build of torch finds no CUDA runtime: not needed here
    try:
        from torch.utils import cpp_extension
    finally:
        logger.setLevel(level)
    capability = torch.backends.cpu.get_cpu_capability()
    flags = compiler_flags(capability)
    try:
        module = cpp_extension.load(name=f'mmcausal_selective_scan_cpu_{capability.lower()}', sources=[str(SOURCE)],
                                    extra_cflags=flags, extra_ldflags=[f for f in flags if f == '-fopenmp'],
                                    verbose=bool(os.environ.get('MMCAUSAL_VERBOSE_BUILD')))
    except Exception as error:  # noqa: BLE001 -- any build failure means: use the PyTorch scan
        return None, f'{type(error).__name__}: {build_error_line(str(error))}'.strip()
    return module, ''


def build_error_line(message: str) -> str:
    """The line of a build failure that says what went wrong: the compiler's first ``error:`` line (the build
    log ends with ninja's "build stopped: subcommand failed"), else the last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line for line in lines if 'error:' in line.lower()]
    return (errors or lines or [''])[0 if errors else -1]


def not_built(reason: str) -> str:
    """The one sentence every report of a failed build starts with (errors and the fallback warning)."""
    return (f'the CPU selective-scan kernel did not build ({reason}); MMCAUSAL_VERBOSE_BUILD=1 in a new process '
            'shows the compiler output')


class CPUScanUnavailable(UserInputError, RuntimeError):
    """The CPU kernel could not be built, raised where a compiled graph holds the kernel's op."""


def _extension():
    module, reason = cpu_scan_extension()
    if module is None:
        raise CPUScanUnavailable(f'{not_built(reason)}; set scan_impl="chunked".')
    return module


@torch.library.custom_op('mmcausal::selective_scan_cpu', mutates_args=())
def _scan(u: Tensor, delta: Tensor, At: Tensor, B: Tensor, C: Tensor, segment: int) -> Tuple[Tensor, Tensor]:
    y, checkpoints = _extension().forward(u, delta, At, B, C, segment)
    return y, checkpoints


@_scan.register_fake
def _(u: Tensor, delta: Tensor, At: Tensor, B: Tensor, C: Tensor, segment: int) -> Tuple[Tensor, Tensor]:
    batch, length, channels = u.shape
    return u.new_empty(u.shape), u.new_empty(batch, -(-length // segment) - 1, B.shape[-1], channels)


@torch.library.custom_op('mmcausal::selective_scan_cpu_backward', mutates_args=())
def _scan_backward(u: Tensor, delta: Tensor, At: Tensor, B: Tensor, C: Tensor, checkpoints: Tensor, grad_y: Tensor,
                   segment: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return tuple(_extension().backward(u, delta, At, B, C, checkpoints, grad_y, segment))


@_scan_backward.register_fake
def _(u: Tensor, delta: Tensor, At: Tensor, B: Tensor, C: Tensor, checkpoints: Tensor, grad_y: Tensor,
      segment: int) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return tuple(torch.empty_like(t) for t in (u, delta, At, B, C))


def _setup_context(ctx, inputs, output) -> None:
    u, delta, At, B, C, segment = inputs
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(u, delta, At, B, C, output[1])
    ctx.segment = segment


def _backward(ctx, grad_y: Tensor, grad_checkpoints: Optional[Tensor]):
    u, delta, At, B, C, checkpoints = ctx.saved_tensors
    return (*_scan_backward(u, delta, At, B, C, checkpoints, grad_y.contiguous(), ctx.segment), None)


_scan.register_autograd(_backward, setup_context=_setup_context)


def cpu_kernel_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The scan through the CPU kernel; operands and result as :func:`~.scan.chunked_selective_scan` (fp32 state and
    result, fp64 for fp64 inputs), differentiable in every operand."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    with torch.autocast('cpu', enabled=False):
        operands = [t.to(dtype).contiguous() for t in (u, delta, A.t(), B, C)]
        return _scan(*operands, SEGMENT)[0]
