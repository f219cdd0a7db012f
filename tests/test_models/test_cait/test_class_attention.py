"""Class attention (CaiT Sec. 3, the official ``LayerScale_Block_CA``) against the formula written here; the stage reads
the patch tokens and never writes them; the ClassAttentionPool neck on feature maps and on token sequences."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mmcausal.models.cait import ClassAttentionBlock, ClassAttentionStage
from mmcausal.models.layers import record_attention
from mmcausal.models.necks import ClassAttentionPool
from mmcausal.utils.errors import UserInputError


def _randomise(module: nn.Module) -> None:
    """Non-trivial weights everywhere (LayerScale and norms too), so no branch hides behind a small init."""
    torch.manual_seed(0)
    with torch.no_grad():
        for param in module.parameters():
            param.normal_(std=.3)


def block_formula(block: ClassAttentionBlock, cls: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
    """The official ``Class_Attention``: ``z = LN1([cls; patches])``, ``q`` from ``z_cls``, ``k, v`` from ``z``; FFN on
    the class token."""
    attn, heads = block.attn, block.attn.num_heads
    z = F.layer_norm(torch.cat((cls, patches), 1), (cls.shape[-1], ), block.norm1.weight, block.norm1.bias, 1e-6)
    q, k, v = (F.linear(t, lin.weight, lin.bias) for t, lin in ((z[:, :1], attn.q), (z, attn.k), (z, attn.v)))
    split = [t.view(t.shape[0], t.shape[1], heads, -1).transpose(1, 2) for t in (q, k, v)]
    scores = split[0] @ split[1].transpose(-1, -2) / split[0].shape[-1] ** .5
    mixed = (scores.softmax(-1) @ split[2]).transpose(1, 2).reshape(cls.shape)
    cls = cls + block.ls1.weight * F.linear(mixed, attn.proj.weight, attn.proj.bias)
    y = F.layer_norm(cls, (cls.shape[-1], ), block.norm2.weight, block.norm2.bias, 1e-6)
    fc1, fc2 = block.ffn.layers[0][0], block.ffn.layers[1]
    return cls + block.ls2.weight * F.linear(F.gelu(F.linear(y, fc1.weight, fc1.bias)), fc2.weight, fc2.bias)


def test_block_equals_the_formula():
    block = ClassAttentionBlock(32, 4).double()
    _randomise(block)
    cls, patches = torch.randn(2, 1, 32, dtype=torch.float64), torch.randn(2, 11, 32, dtype=torch.float64)
    torch.testing.assert_close(block(cls, patches), block_formula(block, cls, patches), rtol=1e-10, atol=1e-10)
    assert all(norm.eps == 1e-6 for norm in (block.norm1, block.norm2))


def test_stage_reads_the_patches_never_writes_them_and_passes_gradients_to_them():
    stage = ClassAttentionStage(32, 4, num_layers=2)
    _randomise(stage)
    patches = torch.randn(2, 9, 32, requires_grad=True)
    before = patches.detach().clone()
    out = stage(patches)
    assert out.shape == (2, 32)
    torch.testing.assert_close(patches.detach(), before, rtol=0, atol=0)
    expected = stage.cls_token.expand(2, -1, -1)
    for block in stage.layers:  # each block sees the same, unchanged patches
        expected = block_formula(block, expected, patches)
    torch.testing.assert_close(out, expected[:, 0], rtol=1e-5, atol=1e-5)
    grad, = torch.autograd.grad(out.sum(), patches)  # "frozen" patches are not a stop-gradient (official code)
    assert grad.abs().sum() > 0


def test_pool_neck_takes_feature_maps_or_tokens_and_rejects_other_widths():
    neck = ClassAttentionPool(16, 2).eval()
    neck.init_weights()
    tokens = torch.randn(2, 12, 16)
    featmap = tokens.transpose(1, 2).reshape(2, 16, 3, 4)
    out, = neck((torch.randn(1), featmap))  # only the last output is pooled
    torch.testing.assert_close(out, neck((tokens, ))[0], rtol=0, atol=0)
    torch.testing.assert_close(out, neck.norm(neck.class_attn(tokens)), rtol=0, atol=0)
    with pytest.raises(UserInputError, match='out_type="featmap"'):
        neck((torch.randn(2, 32), ))


def test_the_class_attention_map_is_readable_through_the_probe():
    stage = ClassAttentionStage(16, 2, num_layers=2)
    _randomise(stage)
    patches = torch.randn(3, 10, 16)
    fast = stage(patches)
    with record_attention(stage) as records:
        probed = stage(patches)
    torch.testing.assert_close(probed, fast, rtol=1e-5, atol=1e-5)
    assert sorted(records) == ['layers.0.attn.attn_probe', 'layers.1.attn.attn_probe']
    weights = records['layers.0.attn.attn_probe'][0]
    assert weights.shape == (3, 2, 1, 11)  # the class token's weights over [cls; patches]
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 2, 1))
