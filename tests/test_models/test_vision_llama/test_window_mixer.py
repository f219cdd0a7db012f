"""Window partition, padding key mask, and windowed attention equal to global attention when one window
covers the grid."""
from functools import partial

import pytest
import torch

from mmcausal.models.layers import GridRoPE, SelfAttention, SwiGLUFFN, TokenLayout, TransformerBlock
from mmcausal.models.vision_llama import WindowedAttention
from mmcausal.models.vision_llama.twins_attention import window_key_mask, window_partition, window_unpartition


# ----------------------------------------------------------------------------------- windows
def test_window_partition_round_trip_and_padding_mask():
    x = torch.randn(2, 5 * 7, 4)
    windows, padded = window_partition(x, (5, 7), 3)
    assert padded == (6, 9) and windows.shape == (2 * 2 * 3, 9, 4)
    torch.testing.assert_close(window_unpartition(windows, (5, 7), padded, 3), x, rtol=0, atol=0)
    mask = window_key_mask((5, 7), 3, batch=2)
    assert mask.shape == (12, 1, 1, 9)
    assert int(mask.sum()) == 2 * 35, 'exactly the image tokens are valid keys'
    assert window_key_mask((6, 9), 3, batch=2) is None


def _block(window_size, mask_window_padding=True):
    torch.manual_seed(0)
    attention = dict(num_heads=2, mask_mode='bidirectional')
    mixer = partial(WindowedAttention, window_size=window_size, mask_padding=mask_window_padding, **attention) \
        if window_size else partial(SelfAttention, **attention)
    ffn = partial(SwiGLUFFN, feedforward_channels=64, bias=False, add_identity=False)
    return TransformerBlock(32, mixer, ffn, norm_cfg=dict(type='LN', eps=1e-6)).eval()


@pytest.mark.parametrize('grid', [(14, 14), (10, 12)])
def test_window_attention_equals_global_attention_when_one_window_covers_the_image(grid):
    x = torch.randn(2, grid[0] * grid[1], 32)
    rope = GridRoPE(16, mode='2d')
    layout = TokenLayout(grid, None, rope.sequence_angles(grid), rope)
    global_out = _block(0)(x, layout)
    window_out = _block(14)(x, layout)
    torch.testing.assert_close(window_out, global_out, rtol=1e-5, atol=1e-5)
    if grid != (14, 14):  # the official unmasked windows attend to the zero padding
        unmasked = _block(14, mask_window_padding=False)(x, layout)
        assert not torch.allclose(unmasked, global_out, atol=1e-4)
