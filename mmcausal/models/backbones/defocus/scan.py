"""Selective scan (Mamba's S6 recurrence, Gu & Dao 2023, Alg. 2), pure PyTorch and fast on CPU.

For every channel ``e`` and state dim ``n`` (diagonal, real ``A``)::

    h_t = exp(delta_t,e * A_e,n) * h_{t-1} + delta_t,e * u_t,e * B_t,n
    y_t,e = sum_n h_t,e,n * C_t,n

:func:`selective_scan` is the one entry point. For CUDA tensors it runs the Triton kernels of :mod:`.triton_scan`
(Triton ships with torch's CUDA builds), for CPU tensors the C++ kernel of :mod:`.cpu_scan` (built on first use),
and :func:`chunked_selective_scan`, pure PyTorch, everywhere else: in a jit trace, and where neither kernel is
available. An export (``torch.export``, ONNX) takes the closed form of :mod:`.segsum_scan`, one graph for every
sequence length. ``mamba_ssm``'s CUDA kernel (the official code's) is taken when asked for by name.

The chunked scan splits the sequence into ``L / T`` chunks of ``T ~ 2 sqrt(L)`` tokens:

1. a local scan inside every chunk from a zero state, all chunks at once (``T`` steps on ``(B, L/T, E, N)``);
2. the state entering each chunk, from the chunk-final local states and the chunk decays (``L / T`` steps);
3. every chunk again from its entering state, with the outputs ``y_t = h_t C_t`` (``T`` steps).

So ``~5 sqrt(L)`` Python steps instead of ``L``, with the arithmetic of the sequential recurrence (twice): no ``T x T``
intra-chunk tensor, which for per-(channel, state) decays would cost ``T`` times more work. Every exponential is of a
non-positive number (a decay), so it is finite at any chunk size; the closed form ``e^{A cumsum} cumsum(e^{-A cumsum}
...)`` of some CPU scans divides by decays and overflows. The state is fp32. The backward pass is written by hand,
like the CUDA kernel's: only the inputs (``O(L (E + N))``) and the ``L / T`` chunk-entering states are saved; the
states of a layer are rebuilt in its backward pass and exist only while it runs (``O(L E N)``, one layer at a time),
and the gradients come from one reverse sweep over the same slices. Each pass takes every decay ``exp(delta_t A)``
once and keeps it while it runs (the exponentials were a third of the scan's time when each sweep took its own).
"""
import functools
import math
import warnings
from typing import Callable, List, NamedTuple, Optional, Type

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from .cpu_scan import cpu_kernel_selective_scan, cpu_scan_extension, not_built
from .segsum_scan import segsum_selective_scan
from .triton_scan import TritonScanUnavailable, compiling_for_gpu, triton_selective_scan

SCAN_IMPLS = ('auto', 'chunked', 'sequential', 'mamba_ssm', 'cpu_kernel', 'triton')


class ScanConfigError(UserInputError, ValueError):
    """An invalid selective-scan setting (unknown implementation, unavailable kernel, bad chunk size)."""


@torch.compiler.assume_constant_result
def _triton_compiles_for_gpu() -> bool:
    """Whether Triton imports and compiles kernels for the GPU (not its interpreter); a constant to
    ``torch.compile``, which calls it once while it traces."""
    return compiling_for_gpu()


@functools.lru_cache(maxsize=None)
def mamba_ssm_kernel() -> Optional[Callable]:
    """``mamba_ssm``'s ``selective_scan_fn`` if the package *and* its compiled CUDA extension are installed.

    Since mamba_ssm 2.2.5 the extension is optional at install time; the module then imports but its
    ``selective_scan_cuda`` is None, so importability alone is not enough.
    """
    try:
        from mamba_ssm.ops import selective_scan_interface as interface
    except ImportError:
        return None
    if getattr(interface, 'selective_scan_cuda', None) is None:
        return None
    return interface.selective_scan_fn


def sequential_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The recurrence one token at a time under autograd (what ``mamba_ssm``'s ``selective_scan_ref`` does): the
    explicit reference. ``L`` Python steps, and autograd keeps every state; shapes and precision as
    :func:`chunked_selective_scan` (fp32 state and result, also under autocast)."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    u, delta, B, C, A = (t.to(dtype) for t in (u, delta, B, C, A))
    state = u.new_zeros(u.shape[0], *A.shape)
    outputs = []
    with torch.autocast(u.device.type, enabled=False):  # autocast would run the h C products in bf16
        for index in range(u.shape[1]):
            inputs = (delta[:, index] * u[:, index]).unsqueeze(-1) * B[:, index].unsqueeze(-2)
            state = torch.addcmul(inputs, torch.exp(delta[:, index].unsqueeze(-1) * A), state)
            outputs.append(torch.matmul(state, C[:, index].unsqueeze(-1)).squeeze(-1))
    return torch.stack(outputs, dim=1)


def check_chunk_size(chunk_size: Optional[int], error: Optional[Type[Exception]] = None) -> None:
    """None (automatic) or a positive number of tokens; ``error`` (:class:`ScanConfigError`) otherwise."""
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise (error or ScanConfigError)(f'chunk_size must be a positive number of tokens or None, got {chunk_size!r}.')


class _Chunks(NamedTuple):
    """The scan's operands padded to whole chunks and viewed ``(batch, chunks, T, ...)``, in the compute dtype."""
    u: Tensor  # (b, c, T, E)
    delta: Tensor  # (b, c, T, E, 1)
    x: Tensor  # delta * u, (b, c, T, E, 1)
    B: Tensor  # (b, c, T, 1, N)
    C: Tensor  # (b, c, T, N, 1)
    A: Tensor  # (E, N)

    def zero_state(self) -> Tensor:
        """A zero state for every chunk, ``(b, c, E, N)``."""
        return self.x.new_zeros(*self.x.shape[:2], *self.A.shape)

    def decay(self, index: int) -> Tensor:
        """``exp(delta_t A)`` at position ``index`` of every chunk, ``(b, c, E, N)``."""
        return torch.exp(self.delta[:, :, index] * self.A)

    def step(self, state: Tensor, index: int, decay: Optional[Tensor] = None) -> Tensor:
        """``h <- exp(delta A) h + delta u B`` at position ``index`` of every chunk (``decay``: that position's
        :meth:`decay`, if already computed)."""
        return torch.addcmul(self.x[:, :, index] * self.B[:, :, index],
                             self.decay(index) if decay is None else decay, state)


def _chunk(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, size: int) -> _Chunks:
    dtype = torch.promote_types(u.dtype, torch.float32)  # fp32 state (fp64 for gradcheck)
    batch, length, channels = u.shape
    pad = -length % size  # padded steps: decay 1, input 0
    u, delta, B, C = (F.pad(t.to(dtype), (0, 0, 0, pad)).unflatten(1, (-1, size)) for t in (u, delta, B, C))
    delta = delta.unsqueeze(-1)
    return _Chunks(u, delta, delta * u.unsqueeze(-1), B.unsqueeze(-2), C.unsqueeze(-1), A.to(dtype))


def _carry(local_end: Tensor, chunk_decay: Tensor, reverse: bool = False) -> Tensor:
    """States entering every chunk, ``(b, c, E, N)``, from each chunk's zero-start final state and total decay:
    ``entering_c = decay_{c-1} * entering_{c-1} + local_end_{c-1}`` (from the right with ``reverse``)."""
    chunks = local_end.shape[1]
    order = range(chunks - 1, -1, -1) if reverse else range(chunks)
    carried = torch.zeros_like(local_end[:, 0])
    entering = [carried] * chunks
    for chunk in order:
        entering[chunk] = carried
        carried = torch.addcmul(local_end[:, chunk], chunk_decay[:, chunk], carried)
    return torch.stack(entering, dim=1)


def _chunk_decay(ops: _Chunks) -> Tensor:
    """``exp(sum_t delta_t A)`` over every chunk, ``(b, c, E, N)``: an exponential of a non-positive number."""
    return torch.exp(ops.delta.sum(dim=2) * ops.A)


class _ChunkedScan(torch.autograd.Function):
    """The chunked scan with a hand-written backward: it saves the inputs and the chunk-entering states and
    rebuilds the states of the layer in backward; every step works on one ``(b, c, E, N)`` slice."""

    @staticmethod
    def forward(ctx, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, size: int,
                keep_decays: bool) -> Tensor:
        ops = _chunk(u, delta, A, B, C, size)
        entering = ops.zero_state()
        decays = [None] * size
        # keep_decays (when a backward will run): step 1's decays are kept for step 3 (one exponential per position,
        # not two), as the backward holds every position's decay anyway; without grad they would be a (b, L, E, N)
        # peak, so step 3 takes them again
        if ops.x.shape[1] > 1:
            state = entering
            for index in range(size):  # 1. final local state of every chunk, all chunks at once
                decay = ops.decay(index)
                decays[index] = decay if keep_decays else None
                state = ops.step(state, index, decay)
            entering = _carry(state, _chunk_decay(ops))  # 2. the state entering each chunk
        state, outputs = entering, []
        for index in range(size):  # 3. every chunk from its entering state, with outputs y_t = h_t C_t
            state = ops.step(state, index, decays[index])
            decays[index] = None
            outputs.append(torch.matmul(state, ops.C[:, :, index]).squeeze(-1))
        ctx.save_for_backward(u, delta, A, B, C, entering)
        ctx.size = size
        return torch.stack(outputs, dim=2).flatten(1, 2)[:, :u.shape[1]]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y: Tensor):
        u, delta, A, B, C, entering = ctx.saved_tensors
        size, length = ctx.size, u.shape[1]
        ops = _chunk(u, delta, A, B, C, size)
        grad_y = F.pad(grad_y.to(ops.A.dtype), (0, 0, 0, -length % size)).unflatten(1, (-1, size)).unsqueeze(-2)
        states, decays, state = [], [], entering
        for index in range(size):  # h_t and exp(delta_t A) of every position (each exponential taken once)
            decays.append(ops.decay(index))
            state = ops.step(state, index, decays[-1])
            states.append(state)

        # dL/dh_t = gy_t C_t + exp(delta_t+1 A) dL/dh_t+1: the same recurrence backwards, with inputs gy_t C_t
        def source(index: int) -> Tensor:
            return grad_y[:, :, index].transpose(-1, -2) * ops.C[:, :, index].transpose(-1, -2)

        passed = ops.zero_state()  # what enters each chunk's last position from the right
        if ops.x.shape[1] > 1:
            local = passed
            for index in range(size - 1, -1, -1):
                local = decays[index] * (source(index) + local)
            passed = _carry(local, _chunk_decay(ops), reverse=True)
        grad_x, grad_B, grad_C, grad_decay_rate = [None] * size, [None] * size, [None] * size, [None] * size
        grad_A = torch.zeros_like(ops.A)
        for index in range(size - 1, -1, -1):
            decay = decays[index]
            grad_state = source(index) + passed
            grad_x[index] = torch.matmul(grad_state, ops.B[:, :, index].transpose(-1, -2))
            grad_B[index] = torch.matmul(ops.x[:, :, index].transpose(-1, -2), grad_state)
            grad_C[index] = torch.matmul(grad_y[:, :, index], states[index])
            previous = states[index - 1] if index else entering
            grad_log_decay = grad_state * decay * previous  # dL/d(delta_t A)
            grad_decay_rate[index] = (grad_log_decay * ops.A).sum(-1)
            grad_A += (grad_log_decay * ops.delta[:, :, index]).sum((0, 1))
            passed = decay * grad_state

        def unchunk(grads: List[Tensor], like: Tensor) -> Tensor:
            return torch.stack(grads, dim=2).flatten(1, 2)[:, :length].reshape(like.shape)

        grad_x = torch.stack(grad_x, dim=2).squeeze(-1)
        grad_u = (grad_x * ops.delta.squeeze(-1)).flatten(1, 2)[:, :length]
        grad_delta = (torch.stack(grad_decay_rate, dim=2) + grad_x * ops.u).flatten(1, 2)[:, :length]
        return (grad_u.to(u.dtype), grad_delta.to(delta.dtype), grad_A.to(A.dtype), unchunk(grad_B, B).to(B.dtype),
                unchunk(grad_C, C).to(C.dtype), None, None)


def chunked_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                           chunk_size: Optional[int] = None) -> Tensor:
    """The selective scan in ``L / T`` chunks (see the module docstring), fp32 state, differentiable.

    Args:
        u: ``(B, L, E)`` inputs.
        delta: ``(B, L, E)`` step sizes ``Delta >= 0`` (softplus already applied).
        A: ``(E, N)`` state matrix (diagonal, ``A <= 0``).
        B, C: ``(B, L, N)`` input / output projections of the state.
        chunk_size: ``T``; ``ceil(2 sqrt(L))`` by default (the fastest of those measured on CPU at L = 65, 197, 1025
            with ``tools/analysis_tools/benchmark_scan.py``).

    Returns:
        ``y`` ``(B, L, E)`` in fp32 (fp64 for fp64 inputs).
    """
    check_chunk_size(chunk_size)
    length = u.shape[1]
    size = min(chunk_size or math.ceil(2 * math.sqrt(length)), length)
    with torch.autocast(u.device.type, enabled=False):  # an fp32 scan also inside a bf16 / fp16 autocast region
        keep_decays = torch.is_grad_enabled() and any(x.requires_grad for x in (u, delta, A, B, C))
        return _ChunkedScan.apply(u, delta, A, B, C, size, keep_decays)


def _mamba_ssm_scan(kernel: Callable, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The same scan through ``mamba_ssm``'s kernel (channels-first layout), returned ``(B, L, E)`` fp32.

    The kernel needs ``u``, ``delta``, ``B`` and ``C`` in one dtype: all go in as fp32 (its state is fp32 anyway),
    outside autocast, so a bf16-autocast training step passes them consistently."""
    def channels_first(x: Tensor) -> Tensor:
        return x.float().transpose(1, 2).contiguous()

    with torch.autocast(u.device.type, enabled=False):
        y = kernel(channels_first(u), channels_first(delta), A.float(), channels_first(B), channels_first(C),
                   delta_softplus=False)
    return y.transpose(1, 2).float()


@torch.compiler.assume_constant_result
def _cpu_kernel_built() -> bool:
    """Whether the CPU kernel is built (building it if needed); a constant to ``torch.compile``, which calls it once
    while it traces."""
    return cpu_scan_extension()[0] is not None


def _takes_cpu_kernel(impl: str) -> bool:
    """Whether a CPU scan takes the CPU kernel: always for ``'cpu_kernel'`` (a :class:`ScanConfigError` if it cannot
    be built); for ``'auto'`` if it builds (else a warning, once, and the chunked scan; a compiled graph takes the
    chunked scan without the warning)."""
    if torch.compiler.is_compiling():
        return impl == 'cpu_kernel' or _cpu_kernel_built()
    module, reason = cpu_scan_extension()
    if module is not None:
        return True
    if impl == 'cpu_kernel':
        raise ScanConfigError(f'scan_impl="cpu_kernel": {not_built(reason)}; use scan_impl="chunked".')
    _warn_chunked_fallback(reason)
    return False


@functools.lru_cache(maxsize=None)
def _warn_chunked_fallback(reason: str) -> None:
    message = not_built(reason)
    warnings.warn(f'{message[0].upper()}{message[1:]}. De-focus Mamba runs the chunked PyTorch scan instead '
                  '(several times slower).')


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, impl: str = 'auto',
                   chunk_size: Optional[int] = None) -> Tensor:
    """``y = scan(u, delta, A, B, C)`` (module docstring); shapes as :func:`chunked_selective_scan`.

    Args:
        impl: ``'auto'`` (CUDA tensors: the Triton kernels, ``mamba_ssm`` if installed where Triton is not;
            CPU tensors: the CPU kernel, chunked if it does not build; chunked in a jit trace),
            ``'chunked'``, ``'sequential'`` (the explicit reference), ``'triton'`` (also on CPU tensors under
            Triton's interpreter, ``TRITON_INTERPRET=1``), ``'mamba_ssm'`` or ``'cpu_kernel'`` (required; a clear
            error if unavailable).
        chunk_size: chunk length of the chunked scan (the kernels do not take it).

    Under ``torch.export`` (ONNX export) every ``impl`` runs :func:`~.segsum_scan.segsum_selective_scan`: standard
    ops and no loop over the sequence, so the graph takes any token count (the kernels are custom ops, the chunked
    and sequential scans loops that the export would unroll at the traced length).
    """
    check_choice('scan_impl', impl, SCAN_IMPLS, ScanConfigError)
    if torch.compiler.is_exporting():  # one graph for every token count: the closed form, no loop over L
        return segsum_selective_scan(u, delta, A, B, C)
    if impl == 'sequential':
        return sequential_selective_scan(u, delta, A, B, C)
    if impl == 'cpu_kernel' and u.device.type != 'cpu':
        raise ScanConfigError(f'scan_impl="cpu_kernel" runs on CPU tensors only, got {u.device}; use '
                              'scan_impl="auto" on this device.')
    # a jit trace gets the chunked scan: standard ops, no custom op in the graph
    traced = torch.jit.is_tracing()
    if impl == 'triton':
        try:
            return triton_selective_scan(u, delta, A, B, C)
        except TritonScanUnavailable as error:
            raise ScanConfigError(str(error)) from None
    if impl == 'auto' and u.is_cuda and not traced and _triton_compiles_for_gpu():
        return triton_selective_scan(u, delta, A, B, C)
    on_cpu = u.device.type == 'cpu' and not traced
    if (impl == 'cpu_kernel' or impl == 'auto' and on_cpu) and _takes_cpu_kernel(impl):
        return cpu_kernel_selective_scan(u, delta, A, B, C)
    # only a CUDA scan looks for mamba_ssm (an import attempt would also break a torch.compile graph)
    kernel = mamba_ssm_kernel() if impl == 'mamba_ssm' or impl == 'auto' and u.is_cuda else None
    if impl == 'mamba_ssm' and kernel is None:
        raise ScanConfigError('scan_impl="mamba_ssm" needs mamba_ssm with its CUDA extension (pip install '
                              'mamba-ssm); use scan_impl="auto" for the Triton or the pure PyTorch scan.')
    if impl == 'mamba_ssm' and not u.is_cuda:
        raise ScanConfigError(f'scan_impl="mamba_ssm" runs on CUDA tensors only, got {u.device}; use '
                              'scan_impl="auto" or "chunked" on this device.')
    if kernel is not None and u.is_cuda:
        return _mamba_ssm_scan(kernel, u, delta, A, B, C)
    return chunked_selective_scan(u, delta, A, B, C, chunk_size)
