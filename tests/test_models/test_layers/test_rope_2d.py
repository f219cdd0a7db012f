"""2D RoPE (VisionLLaMA Sec. 3.1): the official channel layout and (row, column) offset invariance."""
import torch

from mmcausal.models.layers import (
    apply_rotary,
    grid_positions,
    rope_angles_2d,
    rope_frequencies,
)


def rope_2d(head_dim, theta=10000.):
    """``(N, 2)`` positions -> 2D RoPE angles of a ``head_dim`` head."""
    freqs = rope_frequencies(head_dim // 4, theta)
    return lambda positions: rope_angles_2d(positions, freqs)


def score(q, k, pos_q, pos_k, rope):
    """Attention logit between q at ``pos_q`` and k at ``pos_k`` (positions ``(y, x)``)."""
    angles_q = rope(torch.tensor([pos_q], dtype=torch.float32))
    angles_k = rope(torch.tensor([pos_k], dtype=torch.float32))
    rq = apply_rotary(q.view(1, 1, 1, -1), angles_q)
    rk = apply_rotary(k.view(1, 1, 1, -1), angles_k)
    return (rq * rk).sum()


# ----------------------------------------------------------------------------------- 2D RoPE
def test_2d_rope_channel_layout_matches_official_formula():
    """angles[n] = [x w_0, y w_0, x w_1, y w_1, ...], w_k = theta^(-4k/d); rotation of adjacent pairs."""
    head_dim, theta = 16, 10000.
    rope = rope_2d(head_dim, theta)
    positions = grid_positions((3, 5))
    angles = rope(positions)
    assert angles.shape == (15, head_dim // 2)
    w = torch.tensor([theta ** (-4 * k / head_dim) for k in range(head_dim // 4)])
    y, x = positions[:, :1], positions[:, 1:]
    torch.testing.assert_close(angles[:, 0::2], x * w)
    torch.testing.assert_close(angles[:, 1::2], y * w)
    # complex multiplication of adjacent pairs, the official formulation
    t = torch.randn(2, 1, 15, head_dim)
    as_complex = torch.view_as_complex(t.reshape(2, 1, 15, -1, 2)) * torch.polar(torch.ones_like(angles), angles)
    torch.testing.assert_close(apply_rotary(t, angles), torch.view_as_real(as_complex).flatten(-2))
    assert (positions[7] == torch.tensor([1., 2.])).all(), 'token 7 of a 3x5 grid is row 1, column 2'


def test_2d_rope_score_depends_only_on_row_and_column_offsets():
    torch.manual_seed(0)
    rope = rope_2d(32)
    q, k = torch.randn(32), torch.randn(32)
    base = score(q, k, (2., 3.), (5., 1.), rope)
    for shift in [(1., 0.), (0., 7.), (-3., 4.), (0.5, 2.25)]:
        shifted = score(q, k, (2. + shift[0], 3. + shift[1]), (5. + shift[0], 1. + shift[1]), rope)
        torch.testing.assert_close(shifted, base, rtol=1e-4, atol=1e-4)
    # a different offset gives a different score, and swapping the axes matters
    assert not torch.allclose(score(q, k, (2., 3.), (5., 2.), rope), base, atol=1e-3)
    assert not torch.allclose(score(q, k, (3., 2.), (1., 5.), rope), base, atol=1e-3)
