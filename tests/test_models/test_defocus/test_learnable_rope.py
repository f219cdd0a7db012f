"""De-focus's learnable RoPE: the released frequencies and unpaired rotation, the paired variant, bf16 legacy angles."""
import pytest
import torch

from mmcausal.models.defocus import LearnableRoPE, apply_unpaired_rotary, defocus_frequencies
from mmcausal.models.layers import RopeConfigError, apply_rotary
from reference.official_defocus import official_freq, rotate_every_two


def test_initial_frequencies_are_the_released_formula():
    freqs = defocus_frequencies(16)
    torch.testing.assert_close(freqs, official_freq(16))
    assert freqs[0] == pytest.approx(0.7474, abs=1e-4) and freqs[-1] == 0  # the last dim is pure low-pass
    assert (freqs.diff() < 0).all()


def test_unpaired_rotation_is_the_official_rotate_every_two():
    x, angles = torch.randn(2, 9, 16), torch.randn(9, 16) * 5
    torch.testing.assert_close(apply_unpaired_rotary(x, angles), rotate_every_two(x, angles))


def test_unpaired_with_equal_pair_angles_is_the_rotation():
    x, pair_angles = torch.randn(2, 9, 16), torch.randn(9, 8)
    torch.testing.assert_close(apply_unpaired_rotary(x, pair_angles.repeat_interleave(2, dim=-1)),
                               apply_rotary(x, pair_angles))


def test_official_module_reproduces_the_quirk_and_scaled_positions():
    rope = LearnableRoPE(16, 'unpaired')
    x = torch.randn(3, 20, 16)
    theta = (torch.arange(20.) / 4.0)[:, None] * official_freq(16)[None]
    torch.testing.assert_close(rope(x, position_scale=4.0), rotate_every_two(x, theta))
    # not a rotation: the score of two rotated vectors is not a function of the offset alone
    q, k = torch.randn(16), torch.randn(16)
    rotated_q, rotated_k = rope(q.expand(20, 16)), rope(k.expand(20, 16))
    assert not torch.allclose(rotated_q[5] @ rotated_k[3], rotated_q[12] @ rotated_k[10], atol=1e-3)


def test_paired_module_is_a_relative_rotation():
    rope = LearnableRoPE(16, 'paired')
    assert rope.freq.shape == (8, )
    with torch.no_grad():
        rope.freq.copy_(torch.rand(8))
    q, k = torch.randn(16), torch.randn(16)
    rotated_q, rotated_k = rope(q.expand(20, 16)), rope(k.expand(20, 16))
    torch.testing.assert_close(rotated_q.norm(dim=-1), q.norm().expand(20))
    torch.testing.assert_close(rotated_q[5] @ rotated_k[3], rotated_q[12] @ rotated_k[10])


def test_frequencies_are_learnable():
    rope = LearnableRoPE(16)
    rope(torch.randn(2, 10, 16)).square().sum().backward()
    assert rope.freq.grad is not None and rope.freq.grad[:-1].abs().sum() > 0


@pytest.mark.parametrize('pairing', ['unpaired', 'paired'])
def test_an_fp64_module_rotates_in_fp64_and_passes_gradcheck(pairing):
    rope = LearnableRoPE(8, pairing).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64, requires_grad=True)
    assert rope.angles(7).dtype == torch.float64
    assert torch.autograd.gradcheck(lambda x, freq: torch.func.functional_call(rope, {'freq': freq}, (x, ), {
        'position_scale': 3.0}), (x, rope.freq.detach().clone().requires_grad_()))


def test_legacy_bf16_angles_round_in_training_only():
    rope = LearnableRoPE(16, legacy_bf16=True)
    exact = torch.arange(400.)[:, None] * rope.freq.detach()[None]
    rope.train()
    rounded = rope.angles(400)
    expected = (torch.arange(400).bfloat16()[:, None] * rope.freq.detach().bfloat16()[None]).float()
    torch.testing.assert_close(rounded, expected, rtol=0, atol=0)
    large = rounded[rounded >= 256]
    assert large.numel() and (large % 2 == 0).all()  # bf16 has 8 bits of mantissa: even radians from 256 on
    assert not torch.equal(rounded, exact)
    rope.eval()
    torch.testing.assert_close(rope.angles(400), exact)


def test_odd_width_is_rejected():
    with pytest.raises(RopeConfigError, match='even'):
        LearnableRoPE(15)
    with pytest.raises(RopeConfigError, match='pairing'):
        LearnableRoPE(16, 'interleaved')
