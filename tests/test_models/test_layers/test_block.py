"""TransformerBlock composed from a mixer and an optional FFN; the layout memo shared by windowed blocks."""
from functools import partial

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.transformer import FFN

from mmcausal.models.layers import (
    GridRoPE,
    SelfAttention,
    SwiGLUFFN,
    TokenLayout,
    TransformerBlock,
    explicit_attention_mode,
)
from mmcausal.models.vision_llama import WindowedAttention
from mmcausal.models.vision_llama.twins_attention import window_key_mask

MIXER = partial(SelfAttention, num_heads=2, mask_mode='bidirectional')
SWIGLU = partial(SwiGLUFFN, feedforward_channels=64, add_identity=False)


def test_a_block_without_ffn_is_one_residual_branch():
    """Mamba-style block: ``x + DropPath(Mixer(Norm(x)))``, and no FFN keys in the state dict."""
    torch.manual_seed(0)
    block = TransformerBlock(32, MIXER, ffn=None).eval()
    x = torch.randn(2, 6, 32)
    torch.testing.assert_close(block(x), x + block.attn(block.norm1(x)))
    assert not any(key.startswith(('ffn', 'norm2', 'ls2')) for key in block.state_dict())


def test_gelu_mlp_block_equals_the_vit_formula():
    """CaiT/ViT FFN: ``x + fc2(GELU(fc1(LN(x))))`` (mmcv FFN keys ``layers.0.0`` / ``layers.1``)."""
    torch.manual_seed(0)
    mlp = partial(FFN, feedforward_channels=48, act_cfg=dict(type='GELU'), add_identity=False)
    block = TransformerBlock(32, MIXER, mlp, norm_cfg=dict(type='LN', eps=1e-6),
                             layer_scale_init_value=0.1).eval()
    x = torch.randn(2, 6, 32)
    after_attn = x + 0.1 * block.attn(block.norm1(x))
    fc1, fc2 = block.ffn.layers[0][0], block.ffn.layers[1]
    hidden = F.gelu(F.layer_norm(after_attn, (32, ), block.norm2.weight, block.norm2.bias, 1e-6) @ fc1.weight.T
                    + fc1.bias)
    torch.testing.assert_close(block(x), after_attn + 0.1 * (hidden @ fc2.weight.T + fc2.bias))


def test_drop_path_rate_is_settable_at_run_time():
    torch.manual_seed(0)
    block = TransformerBlock(32, MIXER, SWIGLU).train()
    x = torch.randn(64, 4, 32)
    torch.testing.assert_close(block(x), block.eval()(x))  # rate 0: nothing dropped in training
    block.drop_path_rate = 0.5
    assert block.drop_path_rate == 0.5
    dropped = block.train()(x)
    per_sample = (dropped - x).flatten(1).abs().sum(1)
    assert 0 < int((per_sample == 0).sum()) < 64, 'some samples skip both branches'


def test_drop_path_is_stochastic_depth_with_the_same_draws_as_mmcv():
    """Per sample ``x * floor(keep + u) / keep`` with mmcv's draw of ``u`` (so a seeded run drops the same
    samples as mmcv's DropPath); the gradient is the same per-sample scale."""
    block = TransformerBlock(8, MIXER, drop_path_rate=0.3).train()
    x = torch.randn(256, 3, 8, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(1)
    out = block.drop_path(x)
    torch.manual_seed(1)
    keep = (0.7 + torch.rand(256, 1, 1, dtype=torch.float64)).floor()
    torch.testing.assert_close(out, x * keep / 0.7)
    assert 0.5 < keep.mean() < 0.9, 'about 70 % of the samples are kept'
    grad, = torch.autograd.grad(out, x, torch.ones_like(out))
    torch.testing.assert_close(grad, (keep / 0.7).expand_as(x))
    identity = torch.randn_like(x)
    torch.manual_seed(1)
    torch.testing.assert_close(block.drop_path.residual(identity, x), identity + x * keep / 0.7)
    assert block.eval().drop_path(x) is x


def test_windowed_blocks_share_one_local_table_per_window_shape_per_forward():
    """5 x 7 grid, 3 x 3 windows: whole windows and the cut ones (3 x 1, 2 x 3, 2 x 1) each get one table for all
    blocks; the padded form (explicit mode, for the probe) shares one key mask."""
    torch.manual_seed(0)
    window = partial(WindowedAttention, num_heads=2, mask_mode='bidirectional', window_size=3)
    blocks = [TransformerBlock(32, window, SWIGLU).eval() for _ in range(3)]
    grid = (5, 7)
    layout = TokenLayout(grid, rope=GridRoPE(16, mode='2d'))
    x = torch.randn(2, 35, 32)
    for block in blocks:
        x = block(x, layout)
    assert set(layout._memo) == {('window_angles', shape) for shape in ((3, 3), (3, 1), (2, 3), (2, 1))}
    layout = TokenLayout(grid, rope=GridRoPE(16, mode='2d'))
    with explicit_attention_mode():
        for block in blocks:
            block(x, layout)
    mask = layout.memo(('window_key_mask', 3, 2), lambda: None)
    assert mask is not None and torch.equal(mask, window_key_mask(grid, 3, 2))
    assert set(layout._memo) == {('window_key_mask', 3, 2), ('window_angles', (3, 3))}
