"""De-focus ViT / RetNet mixers (paper-derived, Eq. 4 and 8) against the naive formulas of the oracle."""
import pytest
import torch
import torch.nn.functional as F

from mmcausal.models.defocus import (
    DecayAttention,
    LearnableDecay,
    MultiScaleRetention,
    RetentionConfigError,
    folded_decay_attention,
    retention,
    retention_step,
)
from mmcausal.models.layers import SelfAttention, TokenLayout, record_attention
from reference.defocus_reconstruction import (
    decay_softmax_attention,
    paired_rope,
    retention_parallel,
    retention_recurrent,
)


def test_decays_start_at_retnet_like_gammas():
    gammas = torch.exp(LearnableDecay(8).rates()).double()
    torch.testing.assert_close(gammas[[0, -1]], 1 - torch.tensor([2. ** -5, 2. ** -12], dtype=torch.float64))
    assert (gammas.diff() > 0).all()  # from the fastest to the slowest decay
    assert (torch.exp(LearnableDecay(8).rates(decay_scale=2.)) > torch.exp(LearnableDecay(8).rates())).all()


@pytest.mark.parametrize('length', [1, 7, 50])
def test_folded_decay_attention_is_the_formula_with_its_gradients(length):
    torch.manual_seed(length)
    q, k, v = (torch.randn(2, 3, length, 12, dtype=torch.float64, requires_grad=True) for _ in range(3))
    log_rate = torch.tensor([-3.4, -1., 0.5], dtype=torch.float64, requires_grad=True)
    actual = folded_decay_attention(q, k, v, -log_rate.exp())
    expected = decay_softmax_attention(q, k, v, -log_rate.exp())
    torch.testing.assert_close(actual, expected, rtol=1e-9, atol=1e-10)
    weights = torch.randn_like(expected)
    grads = torch.autograd.grad((actual * weights).sum(), (q, k, v, log_rate))
    expected_grads = torch.autograd.grad((expected * weights).sum(), (q, k, v, log_rate))
    for got, want in zip(grads, expected_grads):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def _decay_attention_oracle(module, x, position_scale, decay_scale):
    batch, length, dims = x.shape
    heads, head_dim = module.num_heads, module.head_dim
    q, k, v = F.linear(x, module.qkv.weight, module.qkv.bias).view(batch, length, 3, heads, head_dim).permute(
        2, 0, 3, 1, 4)
    positions = torch.arange(length, dtype=x.dtype) / position_scale
    q, k = paired_rope(q, module.rope.freq, positions), paired_rope(k, module.rope.freq, positions)
    out = decay_softmax_attention(q, k, v, -module.decay.log_rate.exp() / decay_scale)
    return F.linear(out.transpose(1, 2).reshape(batch, length, dims), module.proj.weight, module.proj.bias)


def _spy_fold(monkeypatch):
    """Count the calls of the folded fast path inside DecayAttention."""
    from mmcausal.models.defocus import transformer as decay
    original, calls = decay.folded_decay_attention, []

    def spy(*args):
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(decay, 'folded_decay_attention', spy)
    return calls


# init decays: the folded fast path; lambda_hat = 4 (|lambda| (N - 1) = 36.4 * 59 > FOLD_LIMIT): the float-bias path
@pytest.mark.parametrize('log_rate,folded', [(None, True), (4., False)])
def test_decay_attention_is_eq8_on_every_path(monkeypatch, log_rate, folded):
    calls = _spy_fold(monkeypatch)
    torch.manual_seed(0)
    module = DecayAttention(32, num_heads=4).double()
    with torch.no_grad():
        module.rope.freq.add_(torch.rand(4, dtype=torch.float64))
        if log_rate is not None:
            module.decay.log_rate.fill_(log_rate)
    x = torch.randn(2, 60, 32, dtype=torch.float64)
    layout = TokenLayout((7, 8), 'last', position_scale=2.5, decay_scale=1.5)
    expected = _decay_attention_oracle(module, x, 2.5, 1.5)
    actual = module(x, layout)
    assert bool(calls) == folded
    # RoPE angles and rotations are fp32 by design (as in every mmcausal RoPE): fp32-level agreement
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(expected)
    params = (module.qkv.weight, module.decay.log_rate, module.rope.freq)
    grads = torch.autograd.grad((actual * weights).sum(), params)
    for got, want in zip(grads, torch.autograd.grad((expected * weights).sum(), params)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
    with record_attention(module) as records:  # the analysis path: explicit weights through the probe
        torch.testing.assert_close(module(x, layout), expected, rtol=1e-5, atol=1e-6)
    (weights, ) = records['attn_probe']
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 60, dtype=torch.float64))


def test_decay_attention_without_decay_or_rotation_is_causal_self_attention():
    """The projections are SelfAttention's (same keys, same head split): with zero RoPE frequencies and a vanishing
    decay, DecayAttention equals causal SelfAttention loaded with its qkv/proj weights."""
    torch.manual_seed(0)
    module = DecayAttention(32, num_heads=4).double()
    with torch.no_grad():
        module.rope.freq.zero_()
        module.decay.log_rate.fill_(-60.)
    plain = SelfAttention(32, num_heads=4, mask_mode='causal').double()
    shared = {key: value for key, value in module.state_dict().items() if key.startswith(('qkv.', 'proj.'))}
    assert set(shared) == set(plain.state_dict())
    plain.load_state_dict(shared)
    x = torch.randn(2, 9, 32, dtype=torch.float64)
    torch.testing.assert_close(module(x), plain(x))


def test_fp32_fold_near_its_limit_keeps_fp32_accuracy_and_needs_full_precision_matmuls(monkeypatch):
    calls = _spy_fold(monkeypatch)
    torch.manual_seed(0)
    module = DecayAttention(32, num_heads=4)
    with torch.no_grad():
        module.decay.log_rate.fill_(2.3)  # |lambda| = 9.97: |lambda| (N - 1) = 997 <= FOLD_LIMIT at N = 101
    x = torch.randn(2, 101, 32)
    actual = module(x)
    assert calls == [1]
    expected = _decay_attention_oracle(module.double(), x.double(), 1., 1.)
    torch.testing.assert_close(actual.double(), expected, rtol=1e-4, atol=2e-5)
    module.float()
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision('high')  # TF32 / bf16 products would blow the folded channel's error up
    try:
        module(x)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert calls == [1]


def test_decay_attention_in_bf16_autocast_follows_the_formula():
    torch.manual_seed(0)
    module = DecayAttention(64, num_heads=4)
    with torch.no_grad():
        module.decay.log_rate.copy_(torch.linspace(-1., 0., 4))  # strong decays: |lambda| 0.37 .. 1
    x = torch.randn(2, 50, 64)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        low = module(x)
    assert low.dtype == torch.bfloat16
    module.double()
    expected = _decay_attention_oracle(module, x.double(), 1., 1.)
    error = (low.double() - expected).abs().max()
    with torch.no_grad():
        module.decay.log_rate.fill_(-30.)  # no decay: a control that the bf16 path really applies it
    control = (_decay_attention_oracle(module, x.double(), 1., 1.) - expected).abs().max()
    assert error < 0.1 * control, (error, control)


@pytest.mark.parametrize('length', [1, 5, 33])
@pytest.mark.parametrize('chunk_size', [None, 1, 4, 7, 64])
def test_chunked_retention_is_the_parallel_and_the_recurrent_form(length, chunk_size):
    torch.manual_seed(length)
    q, k = (torch.randn(2, 3, length, 6, dtype=torch.float64, requires_grad=True) for _ in range(2))
    v = torch.randn(2, 3, length, 10, dtype=torch.float64, requires_grad=True)
    rates = -torch.tensor([0.03, 0.7, 30.], dtype=torch.float64, requires_grad=True)  # incl. a very strong decay
    actual = retention(q, k, v, rates, chunk_size)
    parallel = retention_parallel(q, k, v, rates)
    torch.testing.assert_close(actual, parallel, rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(retention_recurrent(q, k, v, rates), parallel, rtol=1e-9, atol=1e-10)
    weights = torch.randn_like(parallel)
    grads = torch.autograd.grad((actual * weights).sum(), (q, k, v, rates))
    for got, want in zip(grads, torch.autograd.grad((parallel * weights).sum(), (q, k, v, rates))):
        torch.testing.assert_close(got, want, rtol=1e-8, atol=1e-10)


def test_stepping_the_recurrent_form_gives_the_chunked_outputs():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 9, 4, dtype=torch.float64) for _ in range(3))
    rates = -torch.tensor([0.1, 1.], dtype=torch.float64)
    state, outs = None, []
    for t in range(9):
        out, state = retention_step(q[:, :, t], k[:, :, t], v[:, :, t], state, rates)
        outs.append(out)
    torch.testing.assert_close(torch.stack(outs, dim=2), retention(q, k, v, rates, chunk_size=4), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize('chunk_size', [None, 8])
def test_multi_scale_retention_is_the_retnet_formula(chunk_size):
    torch.manual_seed(0)
    module = MultiScaleRetention(32, num_heads=4, chunk_size=chunk_size).double()
    with torch.no_grad():
        module.group_norm.weight.normal_()
        module.group_norm.bias.normal_()
    x = torch.randn(2, 21, 32, dtype=torch.float64)
    layout = TokenLayout((4, 5), 'last', position_scale=3., decay_scale=2.)

    def heads(t):
        return t.view(2, 21, 4, 8).transpose(1, 2)

    positions = torch.arange(21, dtype=torch.float64) / 3.
    q = paired_rope(heads(x @ module.q_proj.weight.T), module.rope.freq, positions)
    k = paired_rope(heads(x @ module.k_proj.weight.T), module.rope.freq, positions) / 8 ** 0.5
    out = retention_parallel(q, k, heads(x @ module.v_proj.weight.T), -module.decay.log_rate.exp() / 2.)
    out = F.group_norm(out.transpose(1, 2).reshape(42, 32), 4, module.group_norm.weight, module.group_norm.bias,
                       eps=1e-5).view(2, 21, 32)
    expected = (F.silu(x @ module.g_proj.weight.T) * out) @ module.out_proj.weight.T
    torch.testing.assert_close(module(x, layout), expected, rtol=1e-5, atol=1e-6)  # fp32 RoPE, as above


@pytest.mark.parametrize('chunk_size', [0, 2.5, True, -3])
def test_bad_retention_chunk_size_is_explained(chunk_size):
    with pytest.raises(RetentionConfigError, match='chunk_size'):
        MultiScaleRetention(32, num_heads=4, chunk_size=chunk_size)
