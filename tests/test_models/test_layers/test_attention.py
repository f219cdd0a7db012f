"""Attention mask modes: strict causality, the official soft mask, SDPA paths against the explicit reference;
an additive bias next to the mask modes, and reading attention weights through the probe.

Oracles: ``softmax(q k^T / sqrt(d) + bias + causal) v`` and the soft-mask formulas written out with plain torch ops.
"""
import math
from functools import partial

import pytest
import torch

from mmcausal.models.cait import ClassAttention, TalkingHeadsAttention
from mmcausal.models.defocus import DecayAttention, MultiScaleRetention
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers import (
    SelfAttention,
    TokenLayout,
    apply_rotary,
    check_head_split,
    explicit_attention,
    explicit_attention_mode,
    masked_attention,
    record_attention,
    rope_angles_1d,
    rope_frequencies,
    split_heads,
)
from mmcausal.models.layers.attention import AttentionConfigError
from mmcausal.models.vision_llama import SubsampledAttention, WindowedAttention
from mmcausal.utils.errors import UserInputError

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


@pytest.mark.parametrize('tokens', [1, 7, 50])
@pytest.mark.parametrize('alpha', [0., 0.3, 0.9])
@pytest.mark.parametrize('key_mask', [False, True])
def test_official_mode_sdpa_path_equals_the_formula_in_values_and_gradients(tokens, alpha, key_mask):
    """The training path (one SDPA call over every key twice) against Eq. 2 written out, fp64, forward and the
    gradients of q, k and v; with a boolean key mask (padding keys) too."""
    q, k, v = (t.requires_grad_() for t in _qkv(tokens=tokens))
    mask = torch.rand(2, 1, 1, tokens) > 0.3 if key_mask else None
    if mask is not None:
        mask[..., 0] = True  # every row keeps a key
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float('-inf'))
    soft = alpha + (1 - alpha) * torch.ones(tokens, tokens, dtype=torch.float64).tril()
    expected = (scores.softmax(-1) * soft) @ v
    out = masked_attention(q, k, v, 'official', alpha, attn_bias=mask)
    torch.testing.assert_close(out, expected)
    grad_out = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, (q, k, v), grad_out),
                         torch.autograd.grad(expected, (q, k, v), grad_out)):
        torch.testing.assert_close(got, want)


def test_official_mode_keeps_no_per_head_score_matrix_for_backward():
    """Training in the released weights' mode keeps O(N) per head: no saved tensor reaches B*heads*N^2 elements
    (the explicit path keeps several; the shared (N, 2N) bias is N-independent of batch and heads)."""
    batch, heads, tokens = 2, 4, 96
    attn = SelfAttention(64, heads, mask_mode='official')
    attn.soft_mask_rate = 0.2
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
        attn(torch.randn(batch, tokens, 64)).sum()
    assert max(sizes) < batch * heads * tokens ** 2, sizes
    with explicit_attention_mode(), torch.autograd.graph.saved_tensors_hooks(
            lambda t: sizes.append(t.numel()) or t, lambda t: t):
        attn(torch.randn(batch, tokens, 64))
    assert max(sizes) >= batch * heads * tokens ** 2, 'the reference path (the control) does keep them'


@pytest.mark.parametrize('mode', ['official', 'causal'])
def test_alpha_one_equals_bidirectional(mode):
    q, k, v = _qkv()
    torch.testing.assert_close(masked_attention(q, k, v, mode, 1.0), masked_attention(q, k, v, 'bidirectional'))
    torch.testing.assert_close(masked_attention(q, k, v, 'bidirectional'), explicit_attention(q, k, v))


def _soft_mask(tokens, alpha):
    """iLLaMA Eq. 2's ``S = alpha * 1 + (1 - alpha) * tril``, written out."""
    ones = torch.ones(tokens, tokens, dtype=torch.float64)
    return alpha * ones + (1 - alpha) * ones.tril()


def _soft_masked_attention(q, k, v, alpha, renormalise):
    """Reference soft masks: ``'official'`` (Eq. 2) multiplies the softmax over every key by ``S`` and stops;
    ``'causal'`` multiplies the un-normalised weights ``exp(q k^T / sqrt(d))`` by ``S`` and normalises the rows."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if renormalise:
        weights = scores.exp() * _soft_mask(q.shape[-2], alpha)
        return weights / weights.sum(-1, keepdim=True) @ v
    return (scores.softmax(-1) * _soft_mask(q.shape[-2], alpha)) @ v


@pytest.mark.parametrize('mode', ['causal', 'official'])
@pytest.mark.parametrize('alpha', [0., 0.4])
@pytest.mark.parametrize('explicit', [False, True], ids=['fast', 'explicit'])
def test_soft_masks_equal_their_formulas_on_every_path(mode, alpha, explicit):
    """Both the fast paths and the explicit (probed) path of each soft mask against the formula written out."""
    q, k, v = _qkv()
    expected = _soft_masked_attention(q, k, v, alpha, renormalise=mode == 'causal')
    if explicit:
        with explicit_attention_mode():
            out = masked_attention(q, k, v, mode, alpha, probe=torch.nn.Identity())
    else:
        out = masked_attention(q, k, v, mode, alpha)
    torch.testing.assert_close(out, expected)


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


@pytest.mark.parametrize('alpha', [0., 0.5, 1.])
def test_masked_attention_rejects_an_unknown_mask_mode(alpha):
    """The functional entry point checks the mode itself (not only SelfAttention's constructor): a typo must not
    run as the soft mask at any rate."""
    q, k, v = _qkv()
    with pytest.raises(AttentionConfigError, match=r"Unknown attention mask_mode 'causal_soft'; choose one of "
                                                   r"\['bidirectional', 'causal', 'official'\]"):
        masked_attention(q, k, v, 'causal_soft', alpha)


@pytest.mark.parametrize('mixer', [
    SelfAttention, DecayAttention, ClassAttention, SubsampledAttention, MultiScaleRetention, TalkingHeadsAttention,
    partial(WindowedAttention, window_size=4)])
@pytest.mark.parametrize('embed_dims, num_heads', [(30, 4), (32, 0)])
def test_every_multi_head_mixer_rejects_a_bad_head_split_in_one_line(mixer, embed_dims, num_heads):
    with pytest.raises(UserInputError, match=rf'^embed_dims \({embed_dims}\) must be divisible by num_heads '
                                             rf'\({num_heads}\)\.$'):
        mixer(embed_dims, num_heads)
    assert check_head_split(32, 4) == 8


def test_cached_soft_mask_built_in_inference_mode_still_trains():
    attn = SelfAttention(32, 4, mask_mode='official')
    attn.soft_mask_rate = 0.3
    x = torch.randn(1, 7, 32)
    with torch.inference_mode():
        attn(x)
    attn(x).sum().backward()  # reuses the cached (7, 0.3) table
    assert attn.qkv.weight.grad is not None


# ------------------------------------------------------------------------ additive bias and probe


def _decay_bias(heads, tokens):
    """A De-focus-style learnable decay ``lambda_h (t - s)`` with ``lambda_h < 0`` (De-focus paper Sec. 5.1)."""
    slopes = -torch.tensor([0.1, 0.5, 2.0], dtype=torch.float64)[:heads]
    distance = (torch.arange(tokens)[:, None] - torch.arange(tokens)[None]).double()
    return slopes[:, None, None] * distance


def _reference(q, k, v, bias, causal):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias
    if causal:
        future = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float('-inf'))
    return scores.softmax(-1) @ v


@pytest.mark.parametrize('mode', ['causal', 'bidirectional'])
def test_a_float_bias_adds_to_the_logits_in_every_mode(mode):
    q, k, v = _qkv(tokens=9, dim=8)
    bias = _decay_bias(3, 9)
    out = masked_attention(q, k, v, mode, attn_bias=bias)
    torch.testing.assert_close(out, _reference(q, k, v, bias, causal=mode == 'causal'))


def test_causal_attention_with_a_bias_stays_strictly_causal_and_differentiable():
    q, k, v = (t.requires_grad_() for t in _qkv(tokens=9, dim=8))
    bias = _decay_bias(3, 9).requires_grad_()
    out = masked_attention(q, k, v, 'causal', attn_bias=bias)
    v_changed = v.detach().clone()
    v_changed[..., 5:, :] += 1.
    changed = masked_attention(q, k, v_changed, 'causal', attn_bias=bias)
    torch.testing.assert_close(out[..., :5, :], changed[..., :5, :])
    out.sum().backward()
    assert bias.grad is not None and bias.grad.abs().sum() > 0, 'a learnable decay gets gradients'


def test_a_boolean_key_mask_combines_with_the_causal_mask():
    q, k, v = _qkv(tokens=9, dim=8)
    keys = torch.ones(9, dtype=torch.bool)
    keys[2] = False  # e.g. a padded token
    out = masked_attention(q, k, v, 'causal', attn_bias=keys)
    bias = torch.zeros(9, 9, dtype=torch.float64).masked_fill(~keys, float('-inf'))
    torch.testing.assert_close(out[..., 2:, :], _reference(q, k, v, bias, causal=True)[..., 2:, :])


def _attention(mode, alpha=0.):
    torch.manual_seed(0)
    attn = SelfAttention(24, 3, mask_mode=mode).double().eval()
    attn.soft_mask_rate = alpha
    return attn


@pytest.mark.parametrize('mode,alpha', [('causal', 0.), ('causal', 0.3), ('bidirectional', 0.), ('official', 0.)])
def test_the_probe_sees_the_weights_that_multiply_v(mode, alpha):
    attn = _attention(mode, alpha)
    x = torch.randn(2, 7, 24, dtype=torch.float64)
    seen = []
    attn.attn_probe.register_forward_hook(lambda module, args, out: seen.append(out))
    fast = attn(x)
    assert not seen, 'outside the explicit mode the fast path runs and the probe is silent'
    with explicit_attention_mode():
        explicit = attn(x)
    torch.testing.assert_close(explicit, fast)
    (weights, ) = seen
    assert weights.shape == (2, 3, 7, 7)
    q, k, v = attn.qkv(x).view(2, 7, 3, 3, 8).permute(2, 0, 3, 1, 4)
    torch.testing.assert_close(attn.proj((weights @ v).transpose(1, 2).reshape(2, 7, 24)), fast)
    if mode == 'causal' and alpha == 0.:
        assert (weights.triu(1) == 0).all()
    if mode != 'official':
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64))


def test_the_probe_sees_rotated_queries_and_keys():
    """With RoPE the recorded weights are those of the rotated q/k (what the model really used)."""
    attn = _attention('causal')
    x = torch.randn(1, 5, 24, dtype=torch.float64)
    layout = TokenLayout((1, 5), angles=torch.randn(5, 4, dtype=torch.float64))
    seen = []
    attn.attn_probe.register_forward_hook(lambda module, args, out: seen.append(out))
    with explicit_attention_mode():
        with_rope = attn(x, layout)
        attn(x)
    torch.testing.assert_close(with_rope, attn(x, layout))
    assert not torch.allclose(seen[0], seen[1])


def test_record_attention_reads_every_block_of_a_backbone_without_patching_it():
    torch.manual_seed(0)
    model = ILLaMA(dict(embed_dims=32, num_layers=3, num_heads=2), img_size=32, patch_size=8).eval()
    images = torch.randn(1, 3, 32, 32)
    fast = model(images)[0]
    with record_attention(model) as records:
        explicit = model(images)[0]
    torch.testing.assert_close(explicit, fast, rtol=1e-5, atol=1e-5)
    assert sorted(records) == [f'layers.{i}.attn.attn_probe' for i in range(3)]
    weights = records['layers.0.attn.attn_probe'][0]
    assert weights.shape == (1, 2, 17, 17) and (weights.triu(1) == 0).all(), 'iLLaMA attention is causal'
    model(images)
    assert len(records['layers.0.attn.attn_probe']) == 1, 'hooks are removed on exit'


def test_rope_keeps_no_more_token_widths_for_backward():
    """RoPE makes q and k new tensors. The 3-wide fused qkv output must not stay alive beside them (it would,
    through a view of v), and the heads-first layout must not make the output projection's input a copy: measured,
    attention saves 4 token widths with or without RoPE (q, k, v and the token-major output, which the projection
    reads as a view); a heads-first rotation made it 5, keeping the qkv output 7."""
    batch, tokens, dims, heads = 2, 64, 32, 4
    attn = SelfAttention(dims, heads, mask_mode='bidirectional')
    parameters = {p.untyped_storage().data_ptr() for p in attn.parameters()}

    def saved_activations(angles):
        storages = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            if tensor.grad_fn is not None and storage.data_ptr() not in parameters:
                storages[storage.data_ptr()] = storage.nbytes() // tensor.element_size()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            attn.attend(torch.randn(batch, tokens, dims), angles)
        return sum(storages.values()) / (batch * tokens * dims)

    assert saved_activations(torch.rand(tokens, dims // heads // 2)) <= saved_activations(None) == 4


@pytest.mark.parametrize('per_sample', [False, True])
def test_split_heads_equals_the_heads_first_rotation(per_sample):
    """The token-major split (one rotation of q and k together) gives the q, k, v of the plain heads-first
    reshape rotated by :func:`apply_rotary`, for shared ``(N, hd/2)`` and per-sample ``(B, N, hd/2)`` angles (MAE
    keeps each kept token's own position)."""
    batch, tokens, heads, head_dim = 2, 7, 3, 8
    qkv = torch.randn(batch, tokens, 3, heads, head_dim)
    angles = torch.rand(batch, tokens, head_dim // 2) * 6 if per_sample else torch.rand(tokens, head_dim // 2) * 6
    q, k, v = split_heads(qkv, angles)
    q_ref, k_ref, v_ref = qkv.permute(2, 0, 3, 1, 4)
    torch.testing.assert_close(q, apply_rotary(q_ref, angles))
    torch.testing.assert_close(k, apply_rotary(k_ref, angles))
    torch.testing.assert_close(v, v_ref, rtol=0, atol=0)
    assert all(t.shape == (batch, heads, tokens, head_dim) for t in (q, k, v))


def _rotate_reference(x, angles):
    """Interleaved RoPE written out: pair ``(x0, x1) -> (x0 cos a - x1 sin a, x0 sin a + x1 cos a)``."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    cos, sin = angles.cos(), angles.sin()
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)


@pytest.mark.parametrize('per_sample', [False, True])
@pytest.mark.parametrize('used', ['qkv', 'qk'])
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32, torch.bfloat16])
def test_split_heads_gradients_equal_the_rotation_formula(per_sample, used, dtype):
    """Backward of the fused split (written straight into one qkv-shaped gradient) equals autograd through the
    formula in fp64, for shared and per-sample angles and in every dtype (bf16 rotates in fp32), with zeros where an
    output is unused."""
    batch, tokens, heads, head_dim = 2, 5, 3, 8
    torch.manual_seed(0)
    # inputs representable in dtype, so the fp64 reference sees exactly what ours sees
    qkv = torch.randn(batch, tokens, 3, heads, head_dim).to(dtype).double()
    angles = (torch.rand(*((batch, ) if per_sample else ()), tokens, head_dim // 2) * 6).double()
    grads = [torch.randn(batch, tokens, heads, head_dim).to(dtype).double().transpose(1, 2) for _ in used]
    ours = qkv.to(dtype).requires_grad_()
    outputs = split_heads(ours, angles if dtype == torch.float64 else angles.float())[:len(used)]
    got, = torch.autograd.grad(outputs, ours, [grad.to(dtype) for grad in grads])
    reference = qkv.clone().requires_grad_()
    head_angles = angles.unsqueeze(1) if per_sample else angles
    q, k, v = reference.permute(2, 0, 3, 1, 4)
    expected_outputs = (_rotate_reference(q, head_angles), _rotate_reference(k, head_angles), v)[:len(used)]
    for output, expected_output in zip(outputs, expected_outputs):
        torch.testing.assert_close(output, expected_output.to(dtype))
    expected, = torch.autograd.grad(expected_outputs, reference, grads)
    torch.testing.assert_close(got, expected.to(dtype))
    if used == 'qk':
        assert not got[:, :, 2].any()


def test_split_heads_in_bfloat16_rotates_in_float32():
    """bf16 q is the fp64 rotation of the bf16 input rounded once to bf16 (at most one bf16 step off); a
    rotation computed in bf16 rounds after every product and sum."""
    torch.manual_seed(0)
    qkv = torch.randn(2, 64, 3, 2, 8).bfloat16()
    angles = torch.rand(64, 4) * 6
    q, _, _ = split_heads(qkv, angles)
    assert q.dtype == torch.bfloat16
    expected = _rotate_reference(qkv[:, :, 0].transpose(1, 2).double(), angles.double())
    torch.testing.assert_close(q.double(), expected.bfloat16().double(), rtol=2 ** -7, atol=1e-6)


def test_split_heads_passes_gradients_to_learnable_rope_frequencies():
    """Angles that need a gradient (learnable frequencies) get it; values equal the constant path."""
    torch.manual_seed(0)
    freqs = rope_frequencies(4).requires_grad_()
    attention = SelfAttention(16, num_heads=2, mask_mode='causal')
    x = torch.randn(2, 4, 16)
    angles = rope_angles_1d(torch.arange(4), freqs)
    out = attention.attend(x, angles)
    out.square().sum().backward()
    assert freqs.grad is not None and freqs.grad.abs().sum() > 0
    torch.testing.assert_close(out, attention.attend(x, angles.detach()))


def test_blocks_of_one_forward_share_one_rotation_table():
    """The layout makes ``exp(i a)`` once per forward: every block's backward keeps that one table (not one each),
    and the result equals each block rotating on its own."""
    torch.manual_seed(0)
    blocks = [SelfAttention(16, num_heads=2, mask_mode='causal') for _ in range(3)]
    angles = rope_angles_1d(torch.arange(5), rope_frequencies(4))
    layout = TokenLayout(grid=(1, 5), angles=angles)
    x = torch.randn(2, 5, 16)
    complex_storages = set()

    def pack(tensor):
        if tensor.is_complex():
            complex_storages.add(tensor.untyped_storage().data_ptr())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        shared = [block(x, layout) for block in blocks]
    assert len(complex_storages) == 1
    for block, out in zip(blocks, shared):
        torch.testing.assert_close(out, block.attend(x, angles))
