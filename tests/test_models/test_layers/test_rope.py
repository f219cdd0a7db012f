"""1D RoPE: the rotation formula and relative-position invariance."""
import pytest
import torch

from mmcausal.models.layers import (
    apply_rotary,
    rope_angles_1d,
    rope_frequencies,
)

torch.manual_seed(0)


def rope_1d(head_dim):
    """Positions ``(..., N)`` -> 1D RoPE angles of a ``head_dim`` head."""
    freqs = rope_frequencies(head_dim // 2)
    return lambda positions: rope_angles_1d(positions, freqs)


def test_rope_scores_depend_only_on_relative_position():
    rope = rope_1d(16)
    q, k = torch.randn(1, 1, 1, 16), torch.randn(1, 1, 1, 16)

    def score(t: int, s: int) -> float:
        qt = apply_rotary(q, rope(torch.tensor([t])))
        ks = apply_rotary(k, rope(torch.tensor([s])))
        return float((qt * ks).sum())

    assert score(5, 2) == pytest.approx(score(13, 10), abs=1e-4)
    assert score(0, 7) == pytest.approx(score(20, 27), abs=1e-4)
    assert score(5, 2) != pytest.approx(score(5, 3), abs=1e-3)


def test_rope_matches_complex_rotation_formula():
    """Interleaved pairs (x0 + i x1) times exp(i t w_k), w_k = 10000^(-2k/d)."""
    rope = rope_1d(8)
    x = torch.randn(2, 1, 5, 8)
    positions = torch.arange(5)
    expected_freqs = 10000. ** (-torch.arange(0, 8, 2).double() / 8)
    rotated = torch.view_as_complex(x.double().reshape(2, 1, 5, 4, 2)) * torch.polar(
        torch.ones(5, 4, dtype=torch.float64), positions[:, None].double() * expected_freqs)
    expected = torch.view_as_real(rotated).flatten(-2)
    torch.testing.assert_close(apply_rotary(x, rope(positions)).double(), expected, atol=1e-5, rtol=1e-5)


def test_rope_accepts_per_sample_positions():
    rope = rope_1d(8)
    x = torch.randn(2, 3, 4, 8)
    positions = torch.tensor([[0, 1, 2, 3], [4, 5, 6, 7]])
    out = apply_rotary(x, rope(positions))
    torch.testing.assert_close(out[1], apply_rotary(x[1:], rope(positions[1]))[0])
