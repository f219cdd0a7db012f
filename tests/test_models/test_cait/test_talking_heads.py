"""Talking-heads attention (CaiT SA blocks, paper Sec. 3 and the official ``Attention_talking_head``): the explicit path
against the formula written here, the SDPA formulation against the explicit path, the no-op ``proj_l`` bias, masks after
the pre-softmax mix with the ``proj_w`` bias over valid keys only (padding, and the causal mask ``s <= t``), and no
``heads x N x N`` tensor kept for backward on the SDPA path."""
import pytest
import torch
from torch import nn

from mmcausal.models.cait import (
    TalkingHeadsAttention,
    talking_heads,
    talking_heads_explicit,
    talking_heads_fused,
    talking_heads_sdpa,
)
from mmcausal.models.layers import record_attention
from mmcausal.utils.errors import UserInputError

PATHS = {'explicit': talking_heads_explicit, 'sdpa': talking_heads_sdpa}


def _mixers(heads: int, seed: int = 0) -> tuple:
    """``proj_l`` / ``proj_w`` with weights and biases far from zero and identity."""
    torch.manual_seed(seed)
    mixers = nn.Linear(heads, heads).double(), nn.Linear(heads, heads).double()
    for mixer in mixers:
        nn.init.normal_(mixer.weight, std=.7)
        nn.init.normal_(mixer.bias, std=.3)
    return mixers


def _qkv(batch: int, heads: int, tokens: int, head_dim: int, seed: int = 1) -> list:
    torch.manual_seed(seed)
    return [torch.randn(batch, heads, tokens, head_dim, dtype=torch.float64, requires_grad=True) for _ in range(3)]


def formula(q, k, v, proj_l, proj_w, valid=None, causal=False):
    """The official ``Attention_talking_head``, head by head: ``L_h = sum_g Wl[h,g] s q_g k_g^T + bl[h]``, masked,
    softmax, ``A_h = sum_g Ww[h,g] P_g + bw[h] valid``, ``o_h = A_h v_h``; ``valid`` ``(B, Nk)`` booleans (None = all
    keys); ``causal``: query ``t`` also keeps only the keys ``s <= t``."""
    batch, heads, tokens, head_dim = q.shape
    logits = [q[:, g] @ k[:, g].transpose(-1, -2) * head_dim ** -0.5 for g in range(heads)]
    keep = None if valid is None else valid[:, None, :]
    if causal:
        earlier = torch.tensor([[s <= t for s in range(tokens)] for t in range(tokens)])[None]
        keep = earlier if keep is None else keep & earlier
    probs = []
    for h in range(heads):
        mixed = sum(proj_l.weight[h, g] * logits[g] for g in range(heads)) + proj_l.bias[h]
        if keep is not None:
            mixed = mixed.masked_fill(~keep, float('-inf'))
        probs.append(mixed.softmax(-1))
    outs = []
    for h in range(heads):
        weights = sum(proj_w.weight[h, g] * probs[g] for g in range(heads))
        weights = weights + proj_w.bias[h] * (1. if keep is None else keep.double())
        outs.append(weights @ v[:, h])
    return torch.stack(outs, 1)


@pytest.mark.parametrize('tokens', [1, 7, 50])
@pytest.mark.parametrize('masked', [False, True])
@pytest.mark.parametrize('causal', [False, True])
@pytest.mark.parametrize('path', sorted(PATHS))
def test_both_paths_equal_the_formula_values_and_gradients(path, causal, tokens, masked):
    proj_l, proj_w = _mixers(4)
    q, k, v = _qkv(2, 4, tokens, 8)
    valid = torch.rand(2, tokens) > .4
    valid[:, 0] = True  # every query sees at least one key
    key_mask = valid[:, None, None, :] if masked else None
    out = PATHS[path](q, k, v, proj_l, proj_w, key_mask, causal=causal)
    ref = formula(q, k, v, proj_l, proj_w, valid if masked else None, causal=causal)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(out)
    tensors = [q, k, v, proj_l.weight, proj_w.weight, proj_w.bias]
    grads = torch.autograd.grad(out, tensors, grad)
    ref_grads = torch.autograd.grad(ref, tensors, grad)
    for name, got, want in zip(('q', 'k', 'v', 'Wl', 'Ww', 'bw'), grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=name)


@pytest.mark.parametrize('tokens', [1, 7, 50])
def test_the_fused_path_equals_the_formula_values_and_gradients_in_training_and_inference(tokens):
    """Its autograd function (grad enabled) and its composition (no grad) give the formula's values; the function's
    own backward gives the formula's gradients of every input and mixer parameter (``proj_l``'s bias: zero)."""
    proj_l, proj_w = _mixers(4)
    q, k, v = _qkv(2, 4, tokens, 8)
    out = talking_heads_fused(q, k, v, proj_l, proj_w)
    assert out.grad_fn.name() == '_FusedTalkingHeadsBackward'
    ref = formula(q, k, v, proj_l, proj_w)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    with torch.no_grad():
        torch.testing.assert_close(talking_heads_fused(q, k, v, proj_l, proj_w), ref, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(out)
    tensors = [q, k, v, proj_l.weight, proj_l.bias, proj_w.weight, proj_w.bias]
    grads = torch.autograd.grad(out, tensors, grad)
    ref_grads = torch.autograd.grad(ref, tensors, grad)
    for name, got, want in zip(('q', 'k', 'v', 'Wl', 'bl', 'Ww', 'bw'), grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=name)
    q.requires_grad_(False)  # a frozen input gets no gradient, the others stay exact
    grads = torch.autograd.grad(talking_heads_fused(q, k, v, proj_l, proj_w), [k, v], grad)
    for got, want in zip(grads, ref_grads[1:3]):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


def test_the_fused_path_keeps_one_heads_by_tokens_squared_tensor_for_backward():
    """Backward keeps q, k, v (views of the projection's output) and the softmax output only: one ``h x N x N``
    tensor, where the explicit path's autograd keeps three (and the scaled q)."""
    heads, tokens, head_dim = 4, 64, 8
    module = TalkingHeadsAttention(heads * head_dim, heads)
    x = torch.randn(1, tokens, heads * head_dim, requires_grad=True)
    for impl, squares in (('auto', 1), ('explicit', 3)):
        module.impl = impl
        saved = {}
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: saved.setdefault(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()) and t,
                lambda t: t):
            module(x)
        assert sum(size >= heads * tokens ** 2 * 4 for size in saved.values()) == squares, (impl, saved)


@pytest.mark.parametrize('path', sorted(PATHS))
def test_proj_l_bias_has_no_effect_and_a_zero_gradient(path):
    proj_l, proj_w = _mixers(4)
    q, k, v = _qkv(2, 4, 9, 8)
    out = PATHS[path](q, k, v, proj_l, proj_w)
    grad, = torch.autograd.grad(out.square().sum(), proj_l.bias)
    torch.testing.assert_close(grad, torch.zeros_like(grad), rtol=0, atol=1e-10)
    with torch.no_grad():
        proj_l.bias.add_(5.)
    torch.testing.assert_close(PATHS[path](q, k, v, proj_l, proj_w), out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('path', sorted(PATHS))
def test_masked_padding_keys_are_invisible_also_to_the_proj_w_bias(path):
    """Keys masked out (window padding) give the output of the sequence without them; the unmasked official
    behaviour (``bw`` summed over every key) differs whenever ``bw != 0``."""
    proj_l, proj_w = _mixers(4)
    q, k, v = _qkv(1, 4, 12, 8)
    valid = torch.arange(12) < 9
    masked = PATHS[path](q, k, v, proj_l, proj_w, valid.view(1, 1, 1, 12))[:, :, :9]
    alone = PATHS[path](q[:, :, :9], k[:, :, :9], v[:, :, :9], proj_l, proj_w)
    torch.testing.assert_close(masked, alone, rtol=1e-10, atol=1e-10)
    assert torch.isfinite(masked).all()  # -inf entered after proj_l: no NaN from mixing -inf with signed weights
    unmasked = PATHS[path](q, k, v, proj_l, proj_w)[:, :, :9]
    assert (unmasked - alone).abs().max() > 1e-3  # the padding keys matter when nothing hides them


@pytest.mark.parametrize('mask_mode', ['bidirectional', 'causal'])
def test_the_sdpa_path_keeps_no_heads_by_tokens_squared_tensor_for_backward(mask_mode):
    heads, tokens, head_dim = 4, 256, 8
    module = TalkingHeadsAttention(heads * head_dim, heads, mask_mode=mask_mode)
    x = torch.randn(1, tokens, heads * head_dim, requires_grad=True)
    for impl, expect_square in (('sdpa', False), ('explicit', True)):
        module.impl = impl
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
            module(x)
        assert (max(saved) >= heads * tokens ** 2) == expect_square, (impl, max(saved))


def _module_and_tokens(**kwargs) -> tuple:
    """A seeded fp64 ``TalkingHeadsAttention(32, 4, **kwargs)`` with mixers far from zero and identity, and
    ``(2, 10, 32)`` tokens."""
    torch.manual_seed(0)
    module = TalkingHeadsAttention(32, 4, **kwargs).double()
    for mixer in (module.proj_l, module.proj_w):
        nn.init.normal_(mixer.weight, std=.7)
        nn.init.normal_(mixer.bias, std=.3)
    return module, torch.randn(2, 10, 32, dtype=torch.float64)


def test_module_paths_agree_and_the_probe_sees_the_mixed_weights():
    module, x = _module_and_tokens()
    fast = module(x)
    module.impl = 'explicit'
    torch.testing.assert_close(module(x), fast, rtol=1e-10, atol=1e-10)
    module.impl = 'sdpa'
    with record_attention(module) as records:
        probed = module(x)
    torch.testing.assert_close(probed, fast, rtol=1e-10, atol=1e-10)
    weights, = records['attn_probe']
    assert weights.shape == (2, 4, 10, 10)
    # rows of A sum to sum_g Ww[h, g] + N bw[h] (proj_w mixes after the softmax), not to one
    expected = module.proj_w.weight.sum(1) + 10 * module.proj_w.bias
    torch.testing.assert_close(weights.sum(-1), expected.view(1, 4, 1).expand(2, 4, 10), rtol=1e-10, atol=1e-10)


def _record_paths(monkeypatch) -> list:
    """The names of the talking-heads paths (explicit, fused, sdpa) that run, in order, from now on."""
    called = []
    for name in ('explicit', 'fused', 'sdpa'):
        original = getattr(talking_heads, f'talking_heads_{name}')
        monkeypatch.setattr(talking_heads, f'talking_heads_{name}',
                            lambda *args, _name=name, _original=original, **kwargs: called.append(_name) or
                            _original(*args, **kwargs))
    return called


@pytest.mark.parametrize('tokens,masked,expected', [(64, False, 'fused'), (65, False, 'sdpa'),
                                                     (32, True, 'explicit'), (33, True, 'sdpa')])
def test_auto_takes_the_path_that_keeps_least_for_backward(monkeypatch, tokens, masked, expected):
    """Unmasked: the fused path (one ``h N^2`` tensor kept) while ``N <= 2C`` (the SDPA path keeps ``2 h N C``);
    with a key mask the explicit path while ``N <= C``; the SDPA path beyond."""
    module = TalkingHeadsAttention(32, 4)
    assert module.impl == 'auto'
    called = _record_paths(monkeypatch)
    module.attend(torch.randn(1, tokens, 32),
                  attn_bias=torch.ones(1, 1, 1, tokens, dtype=torch.bool) if masked else None)
    assert called == [expected]


def test_auto_under_autocast_training_keeps_the_paths_that_need_no_fused_function(monkeypatch):
    """Under autocast with grad (the AMP recipes) the fused function does not run, and its composition would keep
    several ``N x N`` tensors: 'auto' takes the explicit path while ``N <= C`` and SDPA beyond, as without it; without
    grad (inference under autocast) the fused composition keeps nothing and stays."""
    module = TalkingHeadsAttention(32, 4)
    called = _record_paths(monkeypatch)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        for tokens in (32, 64):
            module.attend(torch.randn(1, tokens, 32))
        with torch.no_grad():
            module.attend(torch.randn(1, 64, 32))
    assert called == ['explicit', 'sdpa', 'fused']


def test_causal_module_paths_agree_and_each_output_ignores_later_tokens():
    """``mask_mode='causal'``: the SDPA path (causal kernel, cumulative ``bw`` term) equals the explicit one, whose
    mixed weights ``A`` are zero above the diagonal and whose rows sum to ``sum_g Ww[h, g] + (t + 1) bw[h]``; output
    ``t`` does not move when the tokens after ``t`` do."""
    module, x = _module_and_tokens(impl='sdpa', mask_mode='causal')
    fast = module(x)
    module.impl = 'explicit'
    with record_attention(module) as records:
        explicit = module(x)
    torch.testing.assert_close(explicit, fast, rtol=1e-10, atol=1e-10)
    weights, = records['attn_probe']
    assert (weights.triu(1) == 0).all()
    expected = module.proj_w.weight.sum(1).view(4, 1) + torch.arange(1, 11) * module.proj_w.bias.view(4, 1)
    torch.testing.assert_close(weights.sum(-1), expected.expand(2, 4, 10), rtol=1e-10, atol=1e-10)
    later = x.clone()
    later[:, 6:] = torch.randn(2, 4, 32, dtype=torch.float64)
    for impl in ('sdpa', 'explicit'):
        module.impl = impl
        moved = module(later)
        torch.testing.assert_close(moved[:, :6], fast[:, :6], rtol=0, atol=1e-12)
        assert (moved[:, 6:] - fast[:, 6:]).abs().max() > 1e-3


def test_bad_settings_are_user_errors():
    with pytest.raises(UserInputError, match='impl'):
        TalkingHeadsAttention(32, 4, impl='flash')
    with pytest.raises(UserInputError, match='mask_mode'):  # iLLaMA's post-softmax mask: not defined for talking heads
        TalkingHeadsAttention(32, 4, mask_mode='official')
    with pytest.raises(UserInputError, match='boolean key mask'):  # a float bias would be mixed across heads
        TalkingHeadsAttention(32, 4).attend(torch.randn(1, 5, 32), attn_bias=torch.zeros(1, 1, 5, 5))
    with pytest.raises(UserInputError, match='shared by the heads'):  # a per-head mask would be mixed across heads
        TalkingHeadsAttention(32, 4).attend(torch.randn(1, 5, 32), attn_bias=torch.ones(1, 4, 5, 5, dtype=torch.bool))
