"""Shared layers: RoPE, attention mask modes, position-embedding resizing, SwiGLU width."""
from functools import partial

import pytest
import torch

from mmcausal.models.layers import (
    GridRoPE,
    SelfAttention,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    WindowedAttention,
    apply_rotary,
    explicit_attention,
    masked_attention,
    resize_pos_embed,
    rope_angles_1d,
    rope_frequencies,
    soft_causal_weights,
    swiglu_hidden_dims,
)

torch.manual_seed(0)


def rope_1d(head_dim):
    """Positions ``(..., N)`` -> 1D RoPE angles of a ``head_dim`` head."""
    freqs = rope_frequencies(head_dim // 2)
    return lambda positions: rope_angles_1d(positions, freqs)


def _qkv(batch=2, heads=3, tokens=11, dim=16):
    return [torch.randn(batch, heads, tokens, dim, dtype=torch.float64) for _ in range(3)]


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


@pytest.mark.parametrize('alpha', [0., 0.3])
def test_causal_mode_output_ignores_future_tokens(alpha):
    attn = SelfAttention(32, 4, mask_mode='causal').double()
    attn.soft_mask_rate = 0.
    layout = TokenLayout((3, 3), None, rope_1d(8)(torch.arange(9)))
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


def test_resize_pos_embed_keeps_cls_row_last_and_handles_non_square():
    table = torch.randn(1, 4 * 4 + 1, 8)
    resized = resize_pos_embed(table, (4, 4), (3, 6), cls_position='last')
    assert resized.shape == (1, 3 * 6 + 1, 8)
    torch.testing.assert_close(resized[:, -1], table[:, -1])
    same = resize_pos_embed(table, (4, 4), (4, 4), cls_position='last')
    torch.testing.assert_close(same, table)


@pytest.mark.parametrize('dims,hidden', [(192, 512), (384, 1024), (768, 2048), (1024, 2816)])
def test_swiglu_width_rule(dims, hidden):
    assert swiglu_hidden_dims(dims) == hidden


def test_cached_soft_mask_built_in_inference_mode_still_trains():
    attn = SelfAttention(32, 4, mask_mode='official')
    attn.soft_mask_rate = 0.3
    x = torch.randn(1, 7, 32)
    with torch.inference_mode():
        attn(x)
    attn(x).sum().backward()  # reuses the cached (7, 0.3) table
    assert attn.qkv.weight.grad is not None


# ------------------------------------------------------------------------------- windowed attention
def _brute_force_window_attention(x, grid, window, attn, mask_padding):
    """Full attention over the zero-padded grid with an explicit "same window" mask (ViTDet windows).

    Token ``(r, c)`` attends to ``(r', c')`` iff ``r // ws == r' // ws`` and ``c // ws == c' // ws`` (and, with
    ``mask_padding``, ``(r', c')`` lies inside the image). q/k get window-local 2D RoPE, VisionLLaMA's layout:
    channel pair ``2k`` turns by ``(c % ws) w_k``, pair ``2k + 1`` by ``(r % ws) w_k``, ``w_k = 1e4^(-4k/d)``.
    """
    batch, _, dims = x.shape
    height, width = grid
    padded_h, padded_w = -(-height // window) * window, -(-width // window) * window
    canvas = x.new_zeros(batch, padded_h, padded_w, dims)
    canvas[:, :height, :width] = x.view(batch, height, width, dims)
    tokens = canvas.reshape(batch, padded_h * padded_w, dims)
    rows = torch.arange(padded_h).repeat_interleave(padded_w)
    cols = torch.arange(padded_w).repeat(padded_h)
    same_window = (rows[:, None] // window == rows[None] // window) & (cols[:, None] // window == cols[None] // window)
    inside = (rows < height) & (cols < width)
    allowed = same_window & inside[None] if mask_padding else same_window

    heads = attn.num_heads
    head_dim = dims // heads
    qkv = tokens @ attn.qkv.weight.T + attn.qkv.bias
    q, k, v = qkv.view(batch, -1, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    freqs = 10000. ** (-4 * torch.arange(head_dim // 4, dtype=torch.float64) / head_dim)
    angles = torch.stack([(cols % window)[:, None] * freqs, (rows % window)[:, None] * freqs], dim=-1).flatten(1)
    rotation = torch.polar(torch.ones_like(angles), angles)

    def rotate(t):
        pairs = torch.view_as_complex(t.double().reshape(*t.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(pairs * rotation).flatten(-2)

    scores = rotate(q) @ rotate(k).transpose(-1, -2) / head_dim ** 0.5
    weights = scores.masked_fill(~allowed, float('-inf')).softmax(dim=-1)
    out = (weights @ v.double()).transpose(1, 2).reshape(batch, -1, dims)
    out = out @ attn.proj.weight.T.double() + attn.proj.bias.double()
    return out[:, inside].float()


@pytest.mark.parametrize('mask_padding', [True, False])
def test_multi_window_attention_on_a_non_square_grid_equals_brute_force(mask_padding):
    """5 x 7 grid, 3 x 3 windows: 2 x 3 windows, padding at the bottom and the right."""
    torch.manual_seed(0)
    mixer = partial(WindowedAttention, num_heads=2, mask_mode='bidirectional', window_size=3,
                    mask_padding=mask_padding)
    ffn = partial(SwiGLUFFN, feedforward_channels=64, bias=False, add_identity=False)
    block = TransformerBlock(32, mixer, ffn, norm_cfg=dict(type='LN', eps=1e-6)).eval()
    with torch.no_grad():
        block.attn.qkv.bias.normal_()  # the zero padding then yields non-zero keys and values
    grid = (5, 7)
    x = torch.randn(2, grid[0] * grid[1], 32)
    with torch.no_grad():
        out = block(x, TokenLayout(grid, rope=GridRoPE(16, mode='2d')))
        after_attention = x + _brute_force_window_attention(block.norm1(x), grid, 3, block.attn, mask_padding)
        expected = after_attention + block.ffn(block.norm2(after_attention))
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
