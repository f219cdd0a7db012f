"""Attention mask modes: strict causality, the official soft mask, SDPA paths against the explicit reference."""
import pytest
import torch

from mmcausal.models.layers import (
    SelfAttention,
    TokenLayout,
    explicit_attention,
    masked_attention,
    rope_angles_1d,
    rope_frequencies,
    soft_causal_weights,
)

torch.manual_seed(0)


def _qkv(batch=2, heads=3, tokens=11, dim=16):
    return [torch.randn(batch, heads, tokens, dim, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize('alpha', [0., 0.3])
def test_causal_mode_output_ignores_future_tokens(alpha):
    attn = SelfAttention(32, 4, mask_mode='causal').double()
    attn.soft_mask_rate = 0.
    layout = TokenLayout((3, 3), None, rope_angles_1d(torch.arange(9), rope_frequencies(4)))
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    x_changed = x.clone()
    x_changed[:, 6:] = torch.randn(2, 3, 32, dtype=torch.float64)
    out, out_changed = attn(x, layout), attn(x_changed, layout)
    torch.testing.assert_close(out[:, :6], out_changed[:, :6])
    assert not torch.allclose(out[:, 6:], out_changed[:, 6:])
    if alpha:  # the soft warm start deliberately lets the future in
        attn.soft_mask_rate = alpha
        assert not torch.allclose(attn(x, layout)[:, :6], attn(x_changed, layout)[:, :6])


def test_official_mode_is_not_strictly_causal_at_alpha_zero():
    """The released formula leaks the future through the softmax normaliser (documented quirk)."""
    attn = SelfAttention(32, 4, mask_mode='official').double()
    x = torch.randn(1, 9, 32, dtype=torch.float64)
    x_changed = x.clone()
    x_changed[:, -1] += 3.
    assert not torch.allclose(attn(x)[:, :8], attn(x_changed)[:, :8])


@pytest.mark.parametrize('alpha', [0., 0.25, 0.9])
def test_official_mode_equals_post_softmax_formula(alpha):
    q, k, v = _qkv()
    tokens, dim = q.shape[-2], q.shape[-1]
    probs = torch.softmax(q @ k.transpose(-2, -1) / dim ** 0.5, dim=-1)
    mask = alpha * torch.ones(tokens, tokens) + (1 - alpha) * torch.ones(tokens, tokens).tril()
    expected = (probs * mask.double()) @ v
    torch.testing.assert_close(masked_attention(q, k, v, 'official', alpha), expected)


@pytest.mark.parametrize('mode', ['official', 'causal'])
def test_alpha_one_equals_bidirectional(mode):
    q, k, v = _qkv()
    torch.testing.assert_close(masked_attention(q, k, v, mode, 1.0), masked_attention(q, k, v, 'bidirectional'))
    torch.testing.assert_close(masked_attention(q, k, v, 'bidirectional'), explicit_attention(q, k, v))


@pytest.mark.parametrize('alpha', [0., 0.4])
def test_sdpa_causal_paths_equal_explicit_reference(alpha):
    q, k, v = _qkv()
    tokens = q.shape[-2]
    reference = explicit_attention(q, k, v,
                                   logit_bias=soft_causal_weights(tokens, alpha, q.device, q.dtype).log())
    torch.testing.assert_close(masked_attention(q, k, v, 'causal', alpha), reference)


def test_soft_causal_rows_are_renormalised():
    """In 'causal' mode alpha scales future keys before normalisation: alpha = 1 gives uniform attention
    over equal keys, alpha = 0.5 gives the future half weight."""
    tokens = 4
    q = torch.zeros(1, 1, tokens, 2, dtype=torch.float64)
    k = torch.zeros_like(q)
    v = torch.eye(tokens, dtype=torch.float64)[None, None]
    weights = masked_attention(q, k, v, 'causal', 0.5)[0, 0]
    torch.testing.assert_close(weights.sum(-1), torch.ones(tokens, dtype=torch.float64))
    assert weights[0, 0] == pytest.approx(2 * weights[0, 1])


def test_unknown_mask_mode_is_a_clear_error():
    with pytest.raises(ValueError, match='choose one of'):
        SelfAttention(32, 4, mask_mode='causal_soft')


def test_cached_soft_mask_built_in_inference_mode_still_trains():
    attn = SelfAttention(32, 4, mask_mode='official')
    attn.soft_mask_rate = 0.3
    x = torch.randn(1, 7, 32)
    with torch.inference_mode():
        attn(x)
    attn(x).sum().backward()  # reuses the cached (7, 0.3) table
    assert attn.qkv.weight.grad is not None
