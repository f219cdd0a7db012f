"""Windowed attention against a brute-force same-window mask on a non-square grid."""
import math
from functools import partial

import pytest
import torch

from mmcausal.models.layers import GridRoPE, SwiGLUFFN, TokenLayout, TransformerBlock
from mmcausal.models.vision_llama import WindowedAttention

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


def _oracle_window_attention(tokens, grid, window, qkv, proj, heads, mask_mode, alpha):
    """Windowed attention of ``(B, H*W, D)`` fp64 tokens by brute force over the whole grid, no padding: token
    ``(r, c)`` sees ``(r', c')`` in its own window; causal modes order a window's tokens by their window-local raster
    index ``(r mod ws) * ws + (c mod ws)`` (the image's raster order restricted to the window). ``'causal'`` adds
    ``log(alpha)`` to future logits; ``'official'`` multiplies the softmax over the window by
    ``alpha + (1 - alpha) * past`` (iLLaMA Eq. 2). 2D RoPE on window-local positions, as the brute force above."""
    batch, _, dims = tokens.shape
    height, width = grid
    rows = torch.arange(height).repeat_interleave(width)
    cols = torch.arange(width).repeat(height)
    same = (rows[:, None] // window == rows[None] // window) & (cols[:, None] // window == cols[None] // window)
    local = (rows % window) * window + cols % window
    past = (local[None] <= local[:, None]).double()
    head_dim = dims // heads
    q, k, v = (tokens @ qkv.weight.T + qkv.bias).view(batch, -1, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    freqs = 10000. ** (-4 * torch.arange(head_dim // 4, dtype=torch.float64) / head_dim)
    angles = torch.stack([(cols % window)[:, None] * freqs, (rows % window)[:, None] * freqs], dim=-1).flatten(1)
    cos, sin = angles.cos(), angles.sin()

    def rotate(t):
        even, odd = t[..., 0::2], t[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    scores = (rotate(q) @ rotate(k).transpose(-1, -2) / head_dim ** 0.5).masked_fill(~same, float('-inf'))
    if mask_mode == 'causal':
        scores = scores + torch.where(past > 0, 0., math.log(alpha) if alpha > 0 else float('-inf'))
    weights = scores.softmax(dim=-1)
    if mask_mode == 'official':
        weights = weights * (alpha + (1 - alpha) * past)
    out = (weights @ v).transpose(1, 2).reshape(batch, -1, dims)
    return out @ proj.weight.T + proj.bias


@pytest.mark.parametrize('grid,window', [((5, 7), 3), ((6, 6), 3), ((4, 9), 5)])
@pytest.mark.parametrize('mask_mode,alpha', [('bidirectional', 0.), ('causal', 0.), ('causal', 0.4),
                                             ('official', 0.), ('official', 0.4)])
def test_masked_windows_equal_the_oracle_in_values_and_gradients(grid, window, mask_mode, alpha):
    """Windows that the grid cuts (bottom/right) run at their own size; in fp64 the mixer's outputs and the
    gradients of its input and weights equal the brute-force oracle over the unpadded grid (to the rounding of
    the fp32 RoPE table, ~1e-7; a wrong mask or position would be off by O(1))."""
    torch.manual_seed(0)
    attn = WindowedAttention(16, num_heads=2, mask_mode=mask_mode, window_size=window).double()
    attn.soft_mask_rate = alpha
    x = torch.randn(2, grid[0] * grid[1], 16, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(2, grid[0] * grid[1], 16, dtype=torch.float64)
    attn(x, TokenLayout(grid, rope=GridRoPE(8, mode='2d'))).backward(grad_out)
    got = [x.grad] + [p.grad for p in attn.parameters()]

    x_ref = x.detach().requires_grad_()
    attn.zero_grad()
    out_ref = _oracle_window_attention(x_ref, grid, window, attn.qkv, attn.proj, 2, mask_mode, alpha)
    out_ref.backward(grad_out)
    torch.testing.assert_close(attn(x.detach(), TokenLayout(grid, rope=GridRoPE(8, mode='2d'))), out_ref,
                               rtol=1e-5, atol=1e-6)
    for got_grad, want in zip(got, [x_ref.grad] + [p.grad for p in attn.parameters()]):
        torch.testing.assert_close(got_grad, want, rtol=1e-5, atol=1e-6)
