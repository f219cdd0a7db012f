"""The selective scan through Triton (:mod:`.triton_kernels`): CUDA tensors, or CPU tensors under Triton's
interpreter (``TRITON_INTERPRET=1``, how the tests run it without a GPU). Triton ships with CUDA builds of torch;
nothing is compiled ahead of time (Triton compiles the kernels on first use per shape class and caches them).

The ops are registered with ``torch.library`` (fake implementations included), so ``torch.compile`` keeps them in
its graph as single nodes. Saved for backward: the inputs and the state every :data:`SEGMENT` tokens,
``O(L (E + N) + L E N / SEGMENT)``, as the CPU kernel does.
"""
import contextlib
import functools
import os
from types import SimpleNamespace
from typing import Optional, Tuple

import torch
from torch import Tensor

from mmcausal.utils.errors import UserInputError

SEGMENT = 32  # tokens between the states the forward pass keeps for the backward pass
BLOCK_E = 32  # channels per program: b * E / BLOCK_E programs; the B / C gradient partials are (b, L, E / BLOCK_E, N)
NUM_WARPS = 4


class TritonScanUnavailable(UserInputError, RuntimeError):
    """The Triton scan cannot run here (no Triton; CPU tensors without the interpreter, CUDA tensors with it)."""


class TritonScanInputError(UserInputError, ValueError):
    """Operands the Triton scan cannot take (shapes that disagree, several devices, no tokens)."""


def interpreting() -> bool:
    """Whether Triton runs its kernels in the interpreter, on CPU tensors: ``TRITON_INTERPRET=1`` was set when
    triton was first imported (Triton decorates its own library functions then) and is still set."""
    return _imported_interpreted() and _interpret_env()


def compiling_for_gpu() -> bool:
    """Whether Triton compiles kernels for the GPU: imported, and then and now without ``TRITON_INTERPRET``."""
    return triton_available() and not _imported_interpreted() and not _interpret_env()


def _imported_interpreted() -> bool:
    import triton.language as tl
    from triton.runtime.jit import JITFunction
    return not isinstance(tl.sum, JITFunction)


def _interpret_env() -> bool:
    return os.environ.get('TRITON_INTERPRET', '0').lower() in ('1', 'true', 'on', 'yes')


def triton_available() -> bool:
    """Whether ``triton`` imports (it ships with torch's CUDA builds on Linux)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def _decorated(interpret: bool) -> SimpleNamespace:
    # Triton picks interpreter or compiler when a function is decorated, from TRITON_INTERPRET: one set per mode
    import triton

    from . import triton_kernels
    return SimpleNamespace(forward=triton.jit(triton_kernels.selective_scan_forward),
                           backward=triton.jit(triton_kernels.selective_scan_backward))


def kernels(device: torch.device) -> SimpleNamespace:
    """The decorated kernels for tensors on ``device``; :class:`TritonScanUnavailable` where they cannot run."""
    if not triton_available():
        raise TritonScanUnavailable('scan_impl="triton" needs the triton package (it ships with the CUDA builds of '
                                    'torch); use scan_impl="auto".')
    if device.type == 'cuda' and compiling_for_gpu():
        return _decorated(False)
    if device.type == 'cpu' and interpreting():
        return _decorated(True)
    hint = (' (TRITON_INTERPRET=1 was set after triton was imported: set it before Python starts)'
            if _interpret_env() and device.type == 'cpu' else '')
    raise TritonScanUnavailable(f'scan_impl="triton" runs on CUDA tensors (or on CPU tensors under Triton\'s '
                                f'interpreter, TRITON_INTERPRET=1), got {device.type} tensors{hint}; use '
                                'scan_impl="auto".')


def _on_device(tensor: Tensor):
    """Launch on ``tensor``'s GPU (Triton launches on the current CUDA device)."""
    return torch.cuda.device(tensor.device) if tensor.is_cuda else contextlib.nullcontext()


def check_operands(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> None:
    """:class:`TritonScanInputError` unless ``u, delta`` ``(b, L, E)``, ``A`` ``(E, N)``, ``B, C`` ``(b, L, N)`` with
    ``L >= 1``, all on one device (the kernels read them with these strides and no bounds of their own)."""
    if u.dim() != 3 or u.shape[1] < 1:
        raise TritonScanInputError(f'the selective scan needs u of shape (batch, tokens >= 1, channels), got '
                                   f'{tuple(u.shape)}.')
    batch, length, channels = u.shape
    states = B.shape[-1] if B.dim() == 3 else -1
    expected = dict(delta=(batch, length, channels), A=(channels, states), B=(batch, length, states),
                    C=(batch, length, states))
    for name, tensor in zip(expected, (delta, A, B, C)):
        if tuple(tensor.shape) != expected[name]:
            raise TritonScanInputError(f'the selective scan needs {name} of shape {expected[name]} for u of shape '
                                       f'{tuple(u.shape)} and N = {states} states, got {tuple(tensor.shape)}.')
    devices = {t.device for t in (u, delta, A, B, C)}
    if len(devices) > 1:
        raise TritonScanInputError(f'the selective scan\'s operands are on several devices: '
                                   f'{sorted(map(str, devices))}.')


def launch_options(states: int) -> dict:
    """The kernels' compile-time constants and ``num_warps`` for ``N = states`` (also what
    ``tools/analysis_tools/triton_scan_resources.py`` compiles them with)."""
    import triton
    return dict(SEGMENT=SEGMENT, BLOCK_E=BLOCK_E, BLOCK_N=triton.next_power_of_2(states), num_warps=NUM_WARPS)


def _layout(u: Tensor, B: Tensor) -> Tuple[int, int, int, int, int, dict]:
    """``(batch, length, channels, states, checkpoints, launch options)`` of a scan."""
    batch, length, channels = u.shape
    states = B.shape[-1]
    return batch, length, channels, states, -(-length // SEGMENT) - 1, launch_options(states)


@torch.library.custom_op('mmcausal::selective_scan_triton', mutates_args=())
def _scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tuple[Tensor, Tensor]:
    u, delta, A, B, C = (t.contiguous() for t in (u, delta, A, B, C))  # the kernels' strides (no copy if already)
    batch, length, channels, states, num_checkpoints, options = _layout(u, B)
    y = torch.empty_like(u)
    checkpoints = u.new_empty(batch, num_checkpoints, channels, states)
    grid = (batch, -(-channels // BLOCK_E))
    with _on_device(u):
        kernels(u.device).forward[grid](u, delta, A, B, C, y, checkpoints, length, channels, states, num_checkpoints,
                                        **options)
    return y, checkpoints


@_scan.register_fake
def _(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tuple[Tensor, Tensor]:
    batch, length, channels = u.shape
    return u.new_empty(u.shape), u.new_empty(batch, -(-length // SEGMENT) - 1, channels, B.shape[-1])


@torch.library.custom_op('mmcausal::selective_scan_triton_backward', mutates_args=())
def _scan_backward(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, checkpoints: Tensor,
                   grad_y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    import triton
    u, delta, A, B, C, checkpoints, grad_y = (t.contiguous() for t in (u, delta, A, B, C, checkpoints, grad_y))
    batch, length, channels, states, num_checkpoints, options = _layout(u, B)
    blocks = triton.cdiv(channels, BLOCK_E)
    scratch = u.new_empty(batch, blocks, SEGMENT, BLOCK_E, options['BLOCK_N'])
    grad_u, grad_delta = torch.empty_like(u), torch.empty_like(delta)
    grad_A = u.new_empty(batch, channels, states)
    grad_B, grad_C = (u.new_empty(batch, length, blocks, states) for _ in range(2))
    with _on_device(u):
        kernels(u.device).backward[(batch, blocks)](
            u, delta, A, B, C, checkpoints, grad_y, scratch, grad_u, grad_delta, grad_A, grad_B, grad_C, length,
            channels, states, num_checkpoints, **options)
    return grad_u, grad_delta, grad_A.sum(0), grad_B.sum(2), grad_C.sum(2)


@_scan_backward.register_fake
def _(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, checkpoints: Tensor,
      grad_y: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return tuple(torch.empty_like(t) for t in (u, delta, A, B, C))


def _setup_context(ctx, inputs, output) -> None:
    ctx.mark_non_differentiable(output[1])
    ctx.save_for_backward(*inputs, output[1])


def _backward(ctx, grad_y: Tensor, grad_checkpoints: Optional[Tensor]):
    return _scan_backward(*ctx.saved_tensors, grad_y)


_scan.register_autograd(_backward, setup_context=_setup_context)


def triton_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The scan through the Triton kernels; operands and result as :func:`~.scan.chunked_selective_scan` (fp32
    state and result, fp64 for fp64 inputs), differentiable in every operand."""
    if not torch.compiler.is_compiling():  # clear errors before anything is launched
        check_operands(u, delta, A, B, C)
        kernels(u.device)
    dtype = torch.promote_types(u.dtype, torch.float32)
    with torch.autocast(u.device.type, enabled=False):
        return _scan(*(t.to(dtype) for t in (u, delta, A, B, C)))[0]
