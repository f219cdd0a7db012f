"""The formulas of the paper-derived De-focus ViT / RetNet (paper Eq. 4 and 8; no official code exists), written out
naively as a test oracle (torch only, never mmcausal): explicit score matrices and a token-by-token recurrence.
"""
import torch


def paired_rope(x, freqs, positions):
    """Rotate channel pairs (2j, 2j+1) of x (..., L, d) by positions[t] * freqs[j]."""
    angle = positions[:, None].to(x.dtype) * freqs.to(x.dtype)[None, :]
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


def decay_matrix(lam, length, dtype=torch.float64):
    """(heads, L, L): exp(lam_h (t - s)) for s <= t, else 0."""
    t = torch.arange(length, dtype=dtype)
    dist = t[:, None] - t[None, :]
    return torch.where(dist >= 0, torch.exp(lam[:, None, None].to(dtype) * dist.clamp(min=0)), torch.zeros(()))


def decay_softmax_attention(q, k, v, lam):
    """softmax_s(q_t.k_s / sqrt(d) + lam_h (t - s)) over s <= t, times v. q, k, v: (B, heads, L, d)."""
    length = q.shape[-2]
    t = torch.arange(length, dtype=q.dtype)
    dist = t[:, None] - t[None, :]
    logits = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5 + lam[:, None, None].to(q.dtype) * dist
    logits = logits.masked_fill(dist < 0, float('-inf'))
    return logits.softmax(-1) @ v


def retention_parallel(q, k, v, lam):
    """((Q K^T) * D) V with the causal decay matrix D."""
    return ((q @ k.transpose(-1, -2)) * decay_matrix(lam, q.shape[-2], q.dtype)) @ v


def retention_recurrent(q, k, v, lam):
    """S_t = exp(lam) S_{t-1} + k_t^T v_t ; o_t = q_t S_t, one token at a time."""
    gamma = torch.exp(lam.to(q.dtype))[:, None, None]
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])
    outs = []
    for t in range(q.shape[-2]):
        state = gamma * state + k[..., t, :, None] * v[..., t, None, :]
        outs.append((q[..., t, None, :] @ state).squeeze(-2))
    return torch.stack(outs, dim=-2)
