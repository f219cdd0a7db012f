"""``torch.compile`` of every registered backbone: one graph, the eager values and gradients, no
recompilation when a hook changes a rate, no host read of the device on the fast paths.

Dynamo's ``'eager'`` backend (tracing only) or ``'aot_eager'`` (plus the autograd tracing of inductor, without its
code generation) where that decides the assertion; inductor itself in the two slow cases at the end."""
from typing import Callable, Tuple

import pytest
import torch
import torch._dynamo
import torch._dynamo.testing
from torch import Tensor, nn

from dispatch_utils import HostTransfers
from e2e_utils import history, load_config, loss_falls, train
from mmcausal.models.defocus import DecayAttention
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers import SelfAttention, TokenLayout, rope_angles_1d, rope_frequencies
from test_models.test_contract import CASES, _require, build

pytestmark = pytest.mark.usefixtures('single_thread')

IMAGES = (2, 3, 32, 40)  # a 4 x 5 patch grid of the tiny backbones (patch size 8)
CASES_BY_NAME = [param.values for param in CASES if not param.id.count('-')]  # (name, first tiny configuration)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Every test compiles from scratch and leaves no compiled code behind."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _outputs_and_input_grad(model: Callable, images: Tensor, **kwargs) -> Tuple[Tuple[Tensor, ...], Tensor]:
    """The backbone's outputs and the gradient of a fixed function of them with respect to the images."""
    images = images.clone().requires_grad_()
    outs = model(images, **kwargs)
    outs = outs if isinstance(outs, (tuple, list)) else (outs, )
    loss = sum((out.float() * torch.linspace(-1, 1, out.numel()).view_as(out)).sum() for out in outs)
    grad, = torch.autograd.grad(loss, images)
    return tuple(out.detach() for out in outs), grad


@pytest.mark.parametrize('name,tiny', CASES)
def test_backbone_compiles_to_one_graph_with_the_eager_values_and_input_gradients(name, tiny):
    """Every registered backbone (the contract's tiny configurations) in training mode: ``torch._dynamo.explain``
    finds no graph break (so none inside the block loop), and the traced forward and its backward give the eager
    outputs and image gradients in fp32 (inductor: the slow tests at the end)."""
    tiny = _require(tiny, name)
    model = build(name, tiny).train()
    images = torch.randn(IMAGES)
    explanation = torch._dynamo.explain(model)(images, **tiny.forward_kwargs)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    expected_outs, expected_grad = _outputs_and_input_grad(model, images, **tiny.forward_kwargs)
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    outs, grad = _outputs_and_input_grad(compiled, images, **tiny.forward_kwargs)
    assert counter.frame_count == 1
    for out, expected in zip(outs, expected_outs, strict=True):
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('mask_mode', ['causal', 'official'])
def test_new_soft_mask_and_drop_path_rates_reuse_the_compiled_graph(mask_mode):
    """What ``SoftMaskHook`` and ``DropPathScheduleHook`` do every iteration (set the backbone's rates) changes an
    input of the compiled graph, not the graph: one compilation for every rate strictly between 0 and 1, with the
    eager values (the drop-path draws too: dynamo's eager backend draws the same random numbers)."""
    torch.manual_seed(0)
    model = ILLaMA(dict(embed_dims=32, num_layers=3, num_heads=2), img_size=32, patch_size=8,
                   mask_mode=mask_mode).train()
    images = torch.randn(IMAGES)
    counter = torch._dynamo.testing.CompileCounter()
    compiled = torch.compile(model, backend=counter, fullgraph=True)
    for alpha, drop_path_rate in ((.3, .1), (.6, .25), (.9, .5)):
        model.soft_mask_rate, model.drop_path_rate = alpha, drop_path_rate
        torch.manual_seed(1)
        expected = model(images)[0]
        torch.manual_seed(1)
        torch.testing.assert_close(compiled(images)[0], expected, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 1
    model.soft_mask_rate = 0.  # the causal fast path (SDPA is_causal) is another graph, built once
    torch.manual_seed(1)
    expected = model(images)[0]
    torch.manual_seed(1)
    torch.testing.assert_close(compiled(images)[0], expected, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == 2


def _scalar_reads(forward: Callable[[], object]) -> int:
    """How often ``forward()`` reads a tensor's value on the host (on a GPU: waits for every queued kernel)."""
    with HostTransfers() as recorded:
        forward()
    return recorded.calls.count(HostTransfers.SCALAR_READ)


def _host_tensors_of_a_second_forward(model: nn.Module, *inputs: Tensor, **kwargs) -> list:
    """The host ops of a forward at fixed weights after a first one (which may check new weights once)."""
    with torch.no_grad():
        model(*inputs, **kwargs)
        with HostTransfers() as recorded:
            model(*inputs, **kwargs)
    return recorded.calls


@pytest.mark.parametrize('name,tiny', CASES)
def test_backbone_forward_makes_no_tensor_from_host_data(name, tiny):
    """At fixed weights a forward of every registered backbone neither copies host data to the device nor reads a
    value back (a ``torch.tensor`` of a Python value in a forward would copy host data every call)."""
    tiny = _require(tiny, name)
    model = build(name, tiny).eval()
    assert _host_tensors_of_a_second_forward(model, torch.randn(IMAGES), **tiny.forward_kwargs) == []


@pytest.mark.parametrize('cls_rope', ['legacy_trunc', 'legacy_floor'])
def test_legacy_class_token_rope_makes_no_tensor_from_host_data(cls_rope):
    from mmcausal.models.vision_llama import VisionLLaMA
    model = VisionLLaMA(dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32, patch_size=8,
                        rope_mode='as2d', cls_rope=cls_rope).eval()
    assert _host_tensors_of_a_second_forward(model, torch.randn(IMAGES)) == []


def test_generation_network_forward_makes_no_tensor_from_host_data():
    from mmcausal.models import DiffusionTransformer
    network = DiffusionTransformer(dict(embed_dims=32, num_layers=2, num_heads=2), patch_size=2, input_size=8,
                                   num_classes=4).eval()
    latents, timesteps, labels = torch.randn(2, 4, 8, 8), torch.tensor([3., 700.]), torch.tensor([0, 3])
    assert _host_tensors_of_a_second_forward(network, latents, timesteps, labels) == []


def test_decay_fold_limit_is_read_from_the_device_only_after_the_rates_change(monkeypatch):
    """De-focus ViT's attention checks ``|lambda| (N - 1) <= FOLD_LIMIT`` on the host once per new rates (a training
    step), not in every forward: evaluation at fixed weights reads nothing. A step past the limit is still seen."""
    from mmcausal.models.defocus import transformer as decay
    fold, folds = decay.folded_decay_attention, []
    monkeypatch.setattr(decay, 'folded_decay_attention', lambda *args: folds.append(1) or fold(*args))
    torch.manual_seed(0)
    module = DecayAttention(32, num_heads=4)
    x = torch.randn(2, 60, 32)
    assert _scalar_reads(lambda: module(x)) == 1
    assert _scalar_reads(lambda: module(x)) == 0
    assert _scalar_reads(lambda: module(x, TokenLayout((6, 10), decay_scale=2.))) == 1  # new rates
    assert len(folds) == 3
    with torch.no_grad():
        module.decay.log_rate.fill_(4.)  # an optimizer step to |lambda| = 54.6: past the limit at N = 60
    assert _scalar_reads(lambda: module(x)) == 1
    assert len(folds) == 3  # the float-bias path
    module(x)
    assert len(folds) == 3


@pytest.mark.parametrize('log_rate', [None, 4.], ids=['folded', 'biased'])
def test_compiled_decay_attention_takes_the_path_of_the_last_eager_check(log_rate):
    """Compiled as one graph (``fullgraph``: a host read of a device value, ``.item()``, would break it), De-focus
    ViT's attention takes the path the last eager forward chose (the fold, or past the limit the float bias): the
    eager values and gradients (input, decay rates, RoPE frequencies, projections)."""
    torch.manual_seed(0)
    module = DecayAttention(32, num_heads=4)
    if log_rate is not None:
        with torch.no_grad():
            module.decay.log_rate.fill_(log_rate)
    x = torch.randn(2, 60, 32, requires_grad=True)
    params = (x, module.decay.log_rate, module.rope.freq, module.qkv.weight)

    def run(forward: nn.Module) -> Tuple[Tensor, ...]:
        out = forward(x)
        return (out, *torch.autograd.grad((out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum(), params))

    expected = run(module)
    counter = torch._dynamo.testing.CompileCounterWithBackend('aot_eager')
    compiled = torch.compile(module, backend=counter, fullgraph=True)
    for got, want in zip(run(compiled), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert counter.frame_count == 1


def test_compiled_rope_rotates_in_real_arithmetic_like_the_eager_complex_product():
    """Attention with RoPE (iLLaMA's 1D table) compiled equals eager in values and gradients, and the compiled
    graph holds no complex tensor."""
    torch.manual_seed(0)
    attention = SelfAttention(32, num_heads=2, mask_mode='causal')
    layout = TokenLayout((1, 7), angles=rope_angles_1d(torch.arange(7), rope_frequencies(8)))
    x = torch.randn(2, 7, 32, requires_grad=True)
    graphs = []

    def backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    out = attention(x, layout)
    grad, = torch.autograd.grad(out.square().sum(), x)
    compiled = torch.compile(attention, backend=backend, fullgraph=True)
    compiled_out = compiled(x, layout)
    torch.testing.assert_close(compiled_out, out, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.autograd.grad(compiled_out.square().sum(), x)[0], grad, rtol=1e-5, atol=1e-6)
    values = [node.meta.get('example_value') for graph in graphs for node in graph.graph.nodes]
    assert not any(isinstance(value, Tensor) and value.is_complex() for value in values)


@pytest.mark.slow
@pytest.mark.parametrize('name', ['ILLaMA', 'DefocusViT'])
def test_inductor_compiles_the_backbone_with_the_eager_values_and_input_gradients(name):
    """torch.compile's default backend (inductor, C++ code on CPU) on a backbone that rotates with a constant RoPE
    table (iLLaMA) and one with learnable frequencies and the decay fold (De-focus ViT), in training mode."""
    tiny = _require(dict(CASES_BY_NAME)[name], name)
    model = build(name, tiny).train()
    images = torch.randn(IMAGES)
    expected_outs, expected_grad = _outputs_and_input_grad(model, images)
    outs, grad = _outputs_and_input_grad(torch.compile(model, fullgraph=True), images)
    for out, expected in zip(outs, expected_outs, strict=True):
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.e2e
@pytest.mark.slow
def test_twin_trains_with_mmengine_compile(shapes_root, tmp_path):
    """``cfg.compile = True`` (mmengine compiles ``train_step`` with inductor, optimizer step included) trains the
    iLLaMA twin as shipped, with a soft-mask rate that changes every iteration: 2 epochs of 4 iterations."""
    cfg = load_config('illama/illama-nano-p8_1xb32-30e_shapes-64px.py', shapes_root, tmp_path, **{
        'compile': True, 'train_cfg.max_epochs': 2, 'train_cfg.val_interval': 2,
        'train_dataloader.dataset.indices': 64, 'train_dataloader.batch_size': 16,
        'val_dataloader.dataset.indices': 16, 'test_dataloader.dataset.indices': 16,
        **{f'{split}_dataloader.{key}': value for split in ('train', 'val', 'test')
           for key, value in (('num_workers', 0), ('persistent_workers', False))},
        'custom_hooks': [dict(type='SoftMaskHook', schedule='linear', cutoff=4, by_epoch=True, start=.9)],
        'default_hooks.logger.interval': 1, 'default_hooks.checkpoint.interval': 100})
    runner = train(cfg)
    alphas = history(runner, 'train/soft_mask_rate')
    assert len(alphas) == 8 and len(set(alphas)) == 8 and 0 < min(alphas) and max(alphas) < 1
    assert loss_falls(history(runner, 'train/loss'))
