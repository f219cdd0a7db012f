"""Triton kernels of the selective scan (Mamba's S6 recurrence; math in :mod:`..mamba`), forward and backward.

Plain functions, decorated by :func:`.triton_scan.kernels` (``triton.jit``, or Triton's interpreter when
``TRITON_INTERPRET=1``, which runs them on CPU tensors). One program per ``(batch row, block of BLOCK_E channels)``
walks the tokens in order with its ``(BLOCK_E, BLOCK_N)`` state in registers: each token's operands are read once and
``y`` written once, ``h`` never leaves the chip. Every ``SEGMENT`` tokens the forward pass writes the state for the
backward pass, which rebuilds one segment's states at a time in a per-program scratch buffer and runs the adjoint
recurrence ``g_t = C_t gy_t + exp(delta_t+1 A) g_t+1`` from the last token to the first.

Layouts (contiguous): ``u, delta, y`` ``(b, L, E)``; ``A`` ``(E, N)``; ``B, C`` ``(b, L, N)``; checkpoints
``(b, S, E, N)`` with ``S = ceil(L / SEGMENT) - 1`` (the state after tokens ``SEGMENT, 2 SEGMENT, ...``). Gradients
that sum over channels (``B``, ``C``) or over the batch (``A``) are written per program and summed by the caller
(deterministic, no atomics).
"""
import triton.language as tl


def selective_scan_forward(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, y_ptr, checkpoint_ptr, length, channels, states,
                           num_checkpoints, SEGMENT: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_N: tl.constexpr):
    """``h_t = exp(delta_t A) h_t-1 + delta_t u_t B_t``, ``y_t = h_t C_t`` for one block of channels."""
    batch = tl.program_id(0).to(tl.int64)
    channel = tl.program_id(1) * BLOCK_E + tl.arange(0, BLOCK_E)
    state = tl.arange(0, BLOCK_N)
    channel_mask, state_mask = channel < channels, state < states
    tile_mask = channel_mask[:, None] & state_mask[None, :]
    A = tl.load(A_ptr + channel[:, None] * states + state[None, :], mask=tile_mask, other=0.0)
    rows = batch * length  # the batch row's first token
    h = tl.zeros((BLOCK_E, BLOCK_N), dtype=A.dtype)
    for t in range(0, length):
        delta = tl.load(delta_ptr + (rows + t) * channels + channel, mask=channel_mask, other=0.0)
        u = tl.load(u_ptr + (rows + t) * channels + channel, mask=channel_mask, other=0.0)
        B = tl.load(B_ptr + (rows + t) * states + state, mask=state_mask, other=0.0)
        C = tl.load(C_ptr + (rows + t) * states + state, mask=state_mask, other=0.0)
        h = tl.exp(delta[:, None] * A) * h + (delta * u)[:, None] * B[None, :]
        tl.store(y_ptr + (rows + t) * channels + channel, tl.sum(h * C[None, :], axis=1), mask=channel_mask)
        kept = (t + 1) // SEGMENT - 1  # the checkpoint this token ends, if (t + 1) is a multiple of SEGMENT
        if ((t + 1) % SEGMENT == 0) & (kept < num_checkpoints):
            offset = ((batch * num_checkpoints + kept) * channels + channel[:, None]) * states + state[None, :]
            tl.store(checkpoint_ptr + offset, h, mask=tile_mask)


def selective_scan_backward(u_ptr, delta_ptr, A_ptr, B_ptr, C_ptr, checkpoint_ptr, grad_y_ptr, scratch_ptr,
                            grad_u_ptr, grad_delta_ptr, grad_A_ptr, grad_B_ptr, grad_C_ptr, length, channels, states,
                            num_checkpoints, SEGMENT: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_N: tl.constexpr):
    """Gradients of one block of channels: ``grad_u, grad_delta`` ``(b, L, E)`` whole; ``grad_A`` ``(b, E, N)``,
    ``grad_B, grad_C`` ``(b, L, blocks, N)``: this program's share of sums the caller completes."""
    batch = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    blocks = tl.num_programs(1)
    channel = block * BLOCK_E + tl.arange(0, BLOCK_E)
    state = tl.arange(0, BLOCK_N)
    channel_mask, state_mask = channel < channels, state < states
    tile_mask = channel_mask[:, None] & state_mask[None, :]
    tile = channel[:, None] * states + state[None, :]
    A = tl.load(A_ptr + tile, mask=tile_mask, other=0.0)
    rows = batch * length
    scratch = scratch_ptr + (batch * blocks + block) * (SEGMENT * BLOCK_E * BLOCK_N) + (
        tl.arange(0, BLOCK_E)[:, None] * BLOCK_N + state[None, :])  # this program's (SEGMENT, BLOCK_E, BLOCK_N)
    grad_state = tl.zeros((BLOCK_E, BLOCK_N), dtype=A.dtype)  # dL/dh_t through h_t+1
    grad_A = tl.zeros((BLOCK_E, BLOCK_N), dtype=A.dtype)
    for backwards in range(0, num_checkpoints + 1):
        segment = num_checkpoints - backwards
        start = segment * SEGMENT
        end = tl.minimum(start + SEGMENT, length)
        entering = tl.load(checkpoint_ptr + ((batch * num_checkpoints + tl.maximum(segment - 1, 0)) * channels)
                           * states + tile, mask=tile_mask & (segment > 0), other=0.0)
        tl.debug_barrier()  # the previous segment's reads of the scratch are done
        h = entering
        for token in range(start, end):  # rebuild the segment's states
            delta = tl.load(delta_ptr + (rows + token) * channels + channel, mask=channel_mask, other=0.0)
            u = tl.load(u_ptr + (rows + token) * channels + channel, mask=channel_mask, other=0.0)
            B = tl.load(B_ptr + (rows + token) * states + state, mask=state_mask, other=0.0)
            h = tl.exp(delta[:, None] * A) * h + (delta * u)[:, None] * B[None, :]
            tl.store(scratch + (token - start) * (BLOCK_E * BLOCK_N), h)
        tl.debug_barrier()  # the states are written before any thread reads them
        for steps in range(0, end - start):  # the adjoint recurrence, last token first
            t = end - 1 - steps
            previous = tl.load(scratch + tl.maximum(t - start - 1, 0) * (BLOCK_E * BLOCK_N))
            previous = tl.where(t > start, previous, entering)  # h_t-1
            delta = tl.load(delta_ptr + (rows + t) * channels + channel, mask=channel_mask, other=0.0)
            u = tl.load(u_ptr + (rows + t) * channels + channel, mask=channel_mask, other=0.0)
            B = tl.load(B_ptr + (rows + t) * states + state, mask=state_mask, other=0.0)
            C = tl.load(C_ptr + (rows + t) * states + state, mask=state_mask, other=0.0)
            grad_y = tl.load(grad_y_ptr + (rows + t) * channels + channel, mask=channel_mask, other=0.0)
            decay = tl.exp(delta[:, None] * A)
            grad_state += grad_y[:, None] * C[None, :]  # dL/dh_t
            partial = ((rows + t) * blocks + block) * states + state
            tl.store(grad_C_ptr + partial, tl.sum(grad_y[:, None] * h, axis=0), mask=state_mask)
            tl.store(grad_B_ptr + partial, tl.sum(grad_state * (delta * u)[:, None], axis=0), mask=state_mask)
            grad_x = tl.sum(grad_state * B[None, :], axis=1)  # dL/d(delta_t u_t)
            grad_log_decay = grad_state * decay * previous  # dL/d(delta_t A)
            tl.store(grad_u_ptr + (rows + t) * channels + channel, grad_x * delta, mask=channel_mask)
            tl.store(grad_delta_ptr + (rows + t) * channels + channel,
                     grad_x * u + tl.sum(grad_log_decay * A, axis=1), mask=channel_mask)
            grad_A += grad_log_decay * delta[:, None]
            grad_state = decay * grad_state
            h = previous
    tl.store(grad_A_ptr + batch * channels * states + tile, grad_A, mask=tile_mask)
