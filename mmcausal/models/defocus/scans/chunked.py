"""The selective scan in pure PyTorch, fast on CPU and in any trace. The chunked scan splits the sequence into
``L / T`` chunks of ``T ~ 2 sqrt(L)`` tokens:

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
import math
from typing import List, NamedTuple, Optional, Type

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from . import ScanConfigError


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
