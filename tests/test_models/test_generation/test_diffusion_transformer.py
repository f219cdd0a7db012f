"""DiffusionTransformer (DiT / SiT / DiT-LLaMA / SiT-LLaMA): parameter counts of the paper's sizes,
adaLN-Zero, any grid divisible by the patch, RoPE modes, label dropout, guided forward, checkpointing, compile."""
import math

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from mmengine.registry import MODELS as ROOT_MODELS
from mmengine.registry import init_default_scope

from mmcausal.models import DiffusionTransformer
from mmcausal.models.generation import GenerationInputError
from mmcausal.models.generation.conditioning import LabelEmbedder, TimestepEmbedder
from mmcausal.models.layers import sincos_pos_embed_2d
from mmcausal.utils.errors import UserInputError

pytestmark = pytest.mark.usefixtures('single_thread')

TINY = dict(embed_dims=32, num_layers=2, num_heads=2)
#: official counts (``sum(p.numel())`` of the official models, including the N x D sin-cos table)
OFFICIAL_COUNTS = [
    ('base', 4, 'llama', 130_429_568), ('large', 4, 'llama', 464_222_336), ('xlarge', 2, 'llama', 674_968_352),
    ('small', 2, 'llama', 32_940_320), ('xlarge', 2, 'dit', 675_129_632), ('base', 4, 'dit', 130_475_648),
    ('xlarge', 4, 'llama', 674_913_152), ('large', 2, 'dit', 458_102_816), ('small', 8, 'dit', 33_148_160),
]


def tiny(seed: int = 0, randomise: bool = True, **kwargs) -> DiffusionTransformer:
    """A 2-block network; ``randomise`` replaces the zero adaLN init by random weights (so every path counts)."""
    torch.manual_seed(seed)
    kwargs = dict(dict(arch=TINY, patch_size=2, input_size=8, num_classes=10), **kwargs)
    model = DiffusionTransformer(**kwargs).eval()
    if randomise:
        with torch.no_grad():
            for param in model.parameters():
                param.normal_(0, 0.2)
    return model


def batch(size=(8, 12), n: int = 3, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(n, 4, *size, generator=generator), torch.randint(0, 1000, (n, ), generator=generator),
            torch.randint(0, 10, (n, ), generator=generator))


@pytest.mark.parametrize('arch,patch,block,official', OFFICIAL_COUNTS)
def test_parameter_count_is_the_official_one_without_the_sincos_table(arch, patch, block, official):
    with torch.device('meta'):
        model = ROOT_MODELS.build(dict(type='DiffusionTransformer', arch=arch, patch_size=patch, block=block))
    num_tokens = (32 // patch) ** 2
    assert sum(p.numel() for p in model.parameters()) == official - num_tokens * model.embed_dims


def test_registered_in_the_root_registry_and_found_from_mmpretrain():
    init_default_scope('mmpretrain')
    from mmpretrain.registry import MODELS
    assert MODELS.get('DiffusionTransformer') is DiffusionTransformer


def test_adaln_zero_starts_every_block_as_identity_and_the_output_at_zero():
    model = tiny(randomise=False)
    x, t, y = batch()
    tokens = torch.randn(3, 24, 32)
    c = torch.randn(3, 32)
    for layer in model.layers:
        torch.testing.assert_close(layer(tokens, c), tokens, rtol=0, atol=0)
    assert model(x, t, y).abs().max() == 0
    assert not any(isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine for m in model.modules())
    assert {m.eps for m in model.modules() if isinstance(m, torch.nn.LayerNorm)} == {1e-6}


def test_llama_ffn_is_bias_free_swiglu_and_dit_mlp_is_tanh_gelu():
    llama, dit = tiny(randomise=False), tiny(randomise=False, block='dit')
    assert llama.layers[0].ffn.w12.bias is None and llama.layers[0].ffn.w3.bias is None
    assert llama.layers[0].ffn.w3.in_features == 256  # swiglu_hidden_dims(32)
    act = dit.layers[0].ffn.layers[0][1]
    assert act.approximate == 'tanh' and dit.layers[0].ffn.layers[0][0].out_features == 128


def test_swiglu_halves_are_initialised_as_the_official_two_linear_layers():
    """The official ``c_fc1`` (gate) and ``c_fc2`` (up) are separate ``(h, D)`` Linear layers, each xavier-uniform:
    bound ``sqrt(6 / (h + D))``. Each half of the fused ``w12`` must have that bound and std (xavier of the fused
    ``(2h, D)`` matrix would give ``sqrt(6 / (2h + D))``, 0.76x for ``h = 2.67 D``); ``w3`` stays one matrix."""
    model = tiny(randomise=False, arch=dict(embed_dims=96, num_layers=2, num_heads=4))
    for layer in model.layers:
        w12, w3 = layer.ffn.w12.weight.detach(), layer.ffn.w3.weight.detach()
        dims, hidden = w3.shape
        assert w12.shape == (2 * hidden, dims)
        bound, fused_bound = math.sqrt(6 / (hidden + dims)), math.sqrt(6 / (2 * hidden + dims))
        for half in w12.chunk(2):
            assert bound * 0.99 < half.abs().max().item() <= bound
            assert half.abs().max().item() > 1.2 * fused_bound
            assert half.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.03)
            assert half.mean().abs().item() < 0.01 * bound
        assert not torch.equal(*w12.chunk(2))  # two independent draws
        assert bound * 0.99 < w3.abs().max().item() <= bound  # (D, h): the same fans as each half
    fc1 = tiny(randomise=False, block='dit', arch=dict(embed_dims=96, num_layers=1, num_heads=4)).layers[0].ffn
    fc1_bound = math.sqrt(6 / (4 * 96 + 96))  # the GELU MLP's fc1 (4D, D) is one official Linear
    assert fc1_bound * 0.99 < fc1.layers[0][0].weight.abs().max().item() <= fc1_bound


@pytest.mark.parametrize('block', ['llama', 'dit'])
@pytest.mark.parametrize('size', [(8, 8), (8, 12), (14, 6)])
def test_any_grid_divisible_by_the_patch(block, size):
    model = tiny(block=block)
    x, t, y = batch(size)
    out = model(x, t, y)
    assert out.shape == (3, 8, *size) and torch.isfinite(out).all()
    single = model(x[1:2], t[1:2], y[1:2])  # samples are independent
    torch.testing.assert_close(single, out[1:2], rtol=1e-5, atol=1e-5)


def test_inputs_that_do_not_fit_are_refused_in_one_line():
    model = tiny()
    x, t, y = batch((8, 9))
    with pytest.raises(GenerationInputError, match='not divisible by the patch size 2'):
        model(x, t, y)
    x, t, y = batch()
    with pytest.raises(UserInputError, match=r'y must have shape \(3,\)'):
        model(x, t, y[:2])
    with pytest.raises(UserInputError, match='Unknown DiffusionTransformer rope_mode'):
        tiny(rope_mode='1d')
    with pytest.raises(UserInputError, match='cfg_channels must be None'):
        model.forward_with_cfg(x, t, y, 1.5, cfg_channels=5)
    with pytest.raises(UserInputError, match='class_dropout_prob=0'):
        tiny(class_dropout_prob=0.).forward_with_cfg(x, t, y, 1.5)


def test_as2d_equals_2d_at_the_training_grid_and_differs_elsewhere():
    model = tiny(rope_mode='as2d')
    x, t, y = batch((8, 8))
    as2d = model(x, t, y)
    model.rope_mode = '2d'
    torch.testing.assert_close(model(x, t, y), as2d, rtol=0, atol=0)
    x, t, y = batch((16, 8))
    plain = model(x, t, y)
    model.rope_mode = 'as2d'
    assert (model(x, t, y) - plain).abs().max() > 1e-3


def test_positions_matter_llama_through_rope_dit_through_the_sincos_table():
    for block in ('llama', 'dit'):
        model = tiny(block=block)
        x, t, y = batch((8, 8), n=1)
        rolled = model(x.roll(2, dims=3), t, y).roll(-2, dims=3)
        assert (rolled - model(x, t, y)).abs().max() > 1e-3, block


def test_sincos_table_layout():
    table = sincos_pos_embed_2d((2, 3), 8)
    freqs = torch.tensor([1., 0.01])
    for n in range(6):
        x, y = n % 3, n // 3
        expected = torch.cat([torch.sin(x * freqs), torch.cos(x * freqs), torch.sin(y * freqs), torch.cos(y * freqs)])
        torch.testing.assert_close(table[n], expected)


def test_timestep_features_are_cos_first():
    embedder = TimestepEmbedder(8, freq_dim=8)
    t = torch.tensor([0., 3., 999.])
    freqs = torch.exp(-math.log(10000) * torch.arange(4) / 4)
    expected = torch.cat([torch.cos(t[:, None] * freqs), torch.sin(t[:, None] * freqs)], dim=1)
    torch.testing.assert_close(embedder.encode(t), expected)


def test_label_dropout_uses_the_null_label_in_training_only():
    torch.manual_seed(0)
    embedder = LabelEmbedder(10, 4, drop_prob=0.3)
    assert embedder.embedding_table.num_embeddings == 11
    labels = torch.randint(0, 10, (20000, ))
    dropped = embedder.drop(labels)
    assert abs((dropped == 10).float().mean().item() - 0.3) < 0.015
    assert torch.equal(dropped[dropped != 10], labels[dropped != 10])
    embedder.eval()
    torch.testing.assert_close(embedder(labels[:5]), embedder.embedding_table.weight[labels[:5]])
    forced = embedder(labels[:3], force_drop=torch.tensor([1, 0, 1]))
    torch.testing.assert_close(forced[0], embedder.embedding_table.weight[10])
    torch.testing.assert_close(forced[1], embedder.embedding_table.weight[labels[1]])
    assert LabelEmbedder(10, 4, drop_prob=0.).embedding_table.num_embeddings == 10


@pytest.mark.parametrize('cfg_channels,guided', [(3, 3), (None, 4)])
def test_guided_forward_mixes_the_chosen_channels_and_keeps_the_conditional_rest(cfg_channels, guided):
    model = tiny()
    x, t, y = batch()
    cond = model(x, t, y)
    uncond = model(x, t, torch.full_like(y, 10))
    out = model.forward_with_cfg(x, t, y, 4., cfg_channels=cfg_channels)
    # one batch of 2B against two of B: equal up to float rounding of the random-weight outputs (|out| ~ 10)
    torch.testing.assert_close(out[:, :guided], uncond[:, :guided] + 4. * (cond - uncond)[:, :guided],
                               rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out[:, guided:], cond[:, guided:], rtol=1e-4, atol=1e-4)
    assert (out[:, 3] - cond[:, 3]).abs().max() > 1e-3 if guided == 4 else True


def test_with_cp_gives_the_same_gradients():
    grads = []
    for with_cp in (False, True):
        model = tiny(with_cp=with_cp).train()
        x, t, y = batch()
        torch.manual_seed(3)  # the same label dropout
        model(x, t, y).square().mean().backward()
        grads.append([p.grad for p in model.parameters()])
    for plain, checkpointed in zip(*grads):
        torch.testing.assert_close(checkpointed, plain, rtol=1e-5, atol=1e-6)


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize('block', ['llama', 'dit'])
def test_compiles_to_one_graph_with_the_eager_values_and_gradients(block, fresh_dynamo):
    model = tiny(block=block)
    x, t, y = batch()

    def run(forward):
        inputs = x.clone().requires_grad_()
        out = forward(inputs, t, y)
        return out.detach(), torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(),
                                                 inputs)[0]

    expected = run(model)
    counter = torch._dynamo.testing.CompileCounter()
    out, grad = run(torch.compile(model, backend=counter, fullgraph=True))
    assert counter.frame_count == 1
    torch.testing.assert_close(out, expected[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected[1], rtol=1e-5, atol=1e-5)
