"""The selective scan in closed form over chunks (segment sums), for graphs that take any token count.

The scan of :mod:`..mamba` (per channel ``e`` and state ``n``, log decays ``a_t = delta_t A <= 0``)::

    h_t = exp(a_t) h_{t-1} + delta_t u_t B_t,    y_t = h_t C_t


is written here without a Python loop over the sequence, so ``torch.export`` traces one graph for every length
``L`` (the chunked scan runs ``~ sqrt(L)`` steps, a loop that an export unrolls at the traced length). The sequence
is zero-padded to ``K = ceil(L / T)`` chunks of a fixed ``T`` tokens (padded steps: decay 1, input 0), ``K``
symbolic, and with ``seg(a)_{i,j} = a_{j+1} + ... + a_i`` for ``j <= i`` (a sum of non-positive numbers, ``-inf``
above the diagonal, so ``exp(seg)`` is the masked decay matrix and never overflows):

1. intra-chunk states from a zero start: ``g_i = sum_{j <= i} exp(seg(a)_{i,j}) delta_j u_j B_j``
   (a ``(T, T)`` matrix per chunk, channel and state);
2. the state entering each chunk ``k``, from each chunk's final local state ``g_{T-1}`` and total log decay
   ``s_k = sum_t a_t``: ``H_k = sum_{k' < k} exp(seg(s)_{k-1,k'}) g_{T-1}^{(k')}``
   (a ``(K, K)`` matrix per channel and state);
3. ``h_i = g_i + exp(a_0 + ... + a_i) H_k`` and ``y_i = h_i C_i``.

Every exponential is of a sum of non-positive numbers, never of a difference of cumulative sums, so the scan is
finite at any length and decay. The cost is ``O(L T E N + K^2 E N)`` memory (the chunked scan's is ``O(L (E + N))``
plus the states), and no backward is written: an inference path for exports, tested against the chunked scan.
"""
import torch
import torch.nn.functional as F
from torch import Tensor

#: tokens per chunk: the intra-chunk matrices cost ``T`` times the states; the chunk matrix ``(L / T)^2`` of them
SEGSUM_CHUNK = 16


def segment_sums(x: Tensor) -> Tensor:
    """``(..., T) -> (..., T, T)``: ``out[..., i, j] = x[..., j+1] + ... + x[..., i]`` for ``j <= i`` (0 on the
    diagonal), ``-inf`` above it. Summed from masked copies (not a difference of cumulative sums, which loses the
    small sums next to large ones); ``T`` may be symbolic."""
    size = x.shape[-1]
    ones = torch.ones(size, size, dtype=torch.bool, device=x.device)
    sums = x.unsqueeze(-1).expand(*x.shape, size).masked_fill(~ones.tril(-1), 0).cumsum(dim=-2)
    return sums.masked_fill(~ones.tril(), float('-inf'))


def segsum_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor,
                          chunk_size: int = SEGSUM_CHUNK) -> Tensor:
    """``y = scan(u, delta, A, B, C)`` in closed form over chunks of ``chunk_size`` tokens (module docstring).

    Args:
        u, delta: ``(B, L, E)``; ``A``: ``(E, N)`` (``<= 0``); ``B``, ``C``: ``(B, L, N)``; ``L`` may be symbolic.

    Returns:
        ``y`` ``(B, L, E)`` in fp32 (fp64 for fp64 inputs).
    """
    dtype = torch.promote_types(u.dtype, torch.float32)
    batch, length, channels = u.shape
    chunks = (length + chunk_size - 1) // chunk_size
    pad = chunks * chunk_size - length  # padded steps: decay 1 (delta 0), input 0

    def chunked(t: Tensor) -> Tensor:  # (b, L, X) -> (b, K, T, X)
        return F.pad(t.to(dtype), (0, 0, 0, pad)).view(batch, chunks, chunk_size, t.shape[-1])

    u, delta, B, C = chunked(u), chunked(delta), chunked(B), chunked(C)
    with torch.autocast(u.device.type, enabled=False):
        log_decay = (delta.unsqueeze(-1) * A.to(dtype)).movedim(2, -1)  # a_t: (b, K, E, N, T)
        inputs = (delta * u).unsqueeze(-1) * B.unsqueeze(-2)  # delta_t u_t B_t: (b, K, T, E, N)
        # 1. g_i = sum_j exp(seg(a)_ij) x_j B_j: (b, K, E, N, T, T) @ (b, K, E, N, T, 1)
        local = torch.exp(segment_sums(log_decay)).matmul(inputs.movedim(2, -1).unsqueeze(-1)).squeeze(-1)
        # 2. H_k = sum_{k' < k} exp(seg(s)_{k-1,k'}) g_{T-1}^(k'): the chunks' own scan, shifted by one chunk
        chunk_log_decay = log_decay.sum(-1).movedim(1, -1)  # s_k: (b, E, N, K)
        ends = torch.exp(segment_sums(chunk_log_decay)).matmul(local[..., -1].movedim(1, -1).unsqueeze(-1))
        entering = F.pad(ends.squeeze(-1), (1, 0))[..., :chunks].movedim(-1, 1)  # (b, K, E, N)
        # 3. h_i = g_i + exp(a_0 + ... + a_i) H_k, y_i = h_i C_i
        states = local + torch.exp(log_decay.cumsum(-1)) * entering.unsqueeze(-1)  # (b, K, E, N, T)
        y = states.movedim(-1, 2).matmul(C.unsqueeze(-1)).squeeze(-1)  # (b, K, T, E)
    return y.reshape(batch, chunks * chunk_size, channels)[:, :length]
