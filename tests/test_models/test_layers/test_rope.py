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


def _complex_rotation(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Oracle in real arithmetic (the code multiplies complex numbers): ``(x0 cos a - x1 sin a,
    x0 sin a + x1 cos a)`` per channel pair, float64."""
    x0, x1 = x.double()[..., 0::2], x.double()[..., 1::2]
    cos, sin = angles.double().cos(), angles.double().sin()
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize('learnable_angles', [False, True])
def test_rotation_gradients_match_the_formula(learnable_angles):
    """The gradient for x (fixed angles) and for the angles too when they learn (De-focus learnable frequencies)."""
    x = torch.randn(2, 3, 5, 8, requires_grad=True)
    angles = (torch.rand(5, 4) * 6).requires_grad_(learnable_angles)
    grad_out = torch.randn(2, 3, 5, 8)
    apply_rotary(x, angles).backward(grad_out)
    x_ref = x.detach().double().requires_grad_()
    angles_ref = angles.detach().double().requires_grad_(learnable_angles)
    _complex_rotation(x_ref, angles_ref).backward(grad_out.double())
    torch.testing.assert_close(x.grad.double(), x_ref.grad, atol=1e-5, rtol=1e-5)
    if learnable_angles:
        torch.testing.assert_close(angles.grad.double(), angles_ref.grad, atol=1e-4, rtol=1e-4)


def test_fixed_angle_rotation_saves_no_copy_of_its_input():
    """Backward of a fixed rotation keeps cos/sin only (N x d/2 each), never a (B, heads, N, d) tensor: attention
    already saves the rotated q and k, a copy of the unrotated ones (an fp32 upcast kept for backward, say) would
    double that memory."""
    x = torch.randn(2, 4, 64, 16, requires_grad=True) * 1  # a non-leaf, as q and k are
    angles = torch.rand(64, 8)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        apply_rotary(x, angles)
    assert saved and max(saved) <= angles.numel(), saved
