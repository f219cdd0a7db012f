"""Windowed attention against a brute-force same-window mask on a non-square grid."""
from functools import partial

import pytest
import torch

from mmcausal.models.layers import (
    GridRoPE,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    WindowedAttention,
)

torch.manual_seed(0)


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
