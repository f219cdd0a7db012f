"""SwiGLU: the LLaMA width rule, the formula with its gradients, and what backward keeps."""
import pytest
import torch

from mmcausal.models.layers import (
    SwiGLUFFN,
    swiglu_hidden_dims,
)

torch.manual_seed(0)


@pytest.mark.parametrize('dims,hidden', [(192, 512), (384, 1024), (768, 2048), (1024, 2816)])
def test_swiglu_width_rule(dims, hidden):
    assert swiglu_hidden_dims(dims) == hidden


def swiglu_reference(x, w12, b12, w3, b3):
    """``w3(silu(x W1) * (x W2))`` (Shazeer 2020, eq. 6) composed by autograd."""
    x1, x2 = (x @ w12.T + (0 if b12 is None else b12)).chunk(2, dim=-1)
    return (x1 * torch.sigmoid(x1) * x2) @ w3.T + (0 if b3 is None else b3)


@pytest.mark.parametrize('bias', [True, False])
@pytest.mark.parametrize('shape', [(2, 5), (7, )])
def test_swiglu_matches_formula_and_its_gradients(bias, shape):
    """The formula in float64 autograd: values and every gradient, with and without biases, any leading dims."""
    ffn = SwiGLUFFN(16, feedforward_channels=24, bias=bias, add_identity=False).double()
    x = torch.randn(*shape, 16, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(*shape, 16, dtype=torch.float64)
    ffn(x).backward(grad_out)

    x_ref = x.detach().requires_grad_()
    params = [p.detach().clone().requires_grad_() for p in (ffn.w12.weight, ffn.w12.bias, ffn.w3.weight, ffn.w3.bias)
              if p is not None]
    w12, b12, w3, b3 = params if bias else (params[0], None, params[1], None)
    out_ref = swiglu_reference(x_ref, w12, b12, w3, b3)
    out_ref.backward(grad_out)
    torch.testing.assert_close(ffn(x), out_ref, rtol=1e-12, atol=1e-12)
    pairs = [(x.grad, x_ref.grad), (ffn.w12.weight.grad, w12.grad), (ffn.w3.weight.grad, w3.grad)]
    if bias:
        pairs += [(ffn.w12.bias.grad, b12.grad), (ffn.w3.bias.grad, b3.grad)]
    for got, want in pairs:
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_swiglu_gradients_with_a_frozen_projection_or_input():
    """Only the gradients asked for: a frozen ``w3`` still passes the input gradient, a frozen input still gives
    ``w3`` its gradient (fp64, against the formula)."""
    ffn = SwiGLUFFN(8, feedforward_channels=12, add_identity=False).double()
    ffn.w3.weight.requires_grad_(False)
    x = torch.randn(3, 8, dtype=torch.float64, requires_grad=True)
    ffn(x).sum().backward()
    x_ref = x.detach().requires_grad_()
    swiglu_reference(x_ref, ffn.w12.weight.detach(), ffn.w12.bias.detach(), ffn.w3.weight, ffn.w3.bias.detach()) \
        .sum().backward()
    assert ffn.w3.weight.grad is None and ffn.w3.bias.grad is not None
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-12, atol=1e-12)

    ffn.w3.weight.requires_grad_(True)
    ffn.w12.requires_grad_(False)
    w3 = ffn.w3.weight.detach().clone().requires_grad_()
    ffn(x.detach()).sum().backward()
    swiglu_reference(x.detach(), ffn.w12.weight, ffn.w12.bias, w3, ffn.w3.bias.detach()).sum().backward()
    torch.testing.assert_close(ffn.w3.weight.grad, w3.grad, rtol=1e-12, atol=1e-12)


def test_swiglu_float32_equals_autograd_composition():
    """In float32 the fused gate and projection give autograd's values and gradients (same ops, recomputed)."""
    ffn = SwiGLUFFN(32, feedforward_channels=48, add_identity=False)
    x = torch.randn(2, 9, 32, requires_grad=True)
    grad_out = torch.randn(2, 9, 32)
    out = ffn(x)
    out.backward(grad_out)
    grads = [x.grad] + [p.grad.clone() for p in ffn.parameters()]
    x_ref = x.detach().requires_grad_()
    ffn.zero_grad()
    x1, x2 = ffn.w12(x_ref).chunk(2, dim=-1)
    out_ref = ffn.w3(torch.nn.functional.silu(x1) * x2)
    out_ref.backward(grad_out)
    torch.testing.assert_close(out, out_ref, rtol=0, atol=0)
    for got, want in zip(grads, [x_ref.grad] + [p.grad for p in ffn.parameters()]):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


def test_swiglu_backward_keeps_two_hidden_widths_per_token():
    """Saved for backward: the input and the ``w12`` output (2h) per token, the gated product is recomputed;
    plain autograd also keeps ``silu(x1)`` and the gated product (4h). With VisionLLaMA's MAE width
    (h = 8192 at D = 768) the gated product would be a third of what a block keeps (the ViTDet backbone at 1024 px)."""
    tokens, dims, hidden = 64, 16, 40
    ffn = SwiGLUFFN(dims, feedforward_channels=hidden, bias=False, add_identity=False)
    x = torch.randn(1, tokens, dims) * 1
    saved = {}
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.setdefault(t.data_ptr(), t.numel()) and t,
                                                  lambda t: t):
        ffn(x)
    activations = sum(n for n in saved.values() if n >= tokens * dims)
    assert activations == tokens * (dims + 2 * hidden), (activations, tokens * (dims + 2 * hidden))


def test_swiglu_gate_in_bfloat16_matches_float32():
    """Under CPU autocast the gate runs in bfloat16 and its values and gradients stay near the float32 ones."""
    ffn = SwiGLUFFN(16, feedforward_channels=24, add_identity=False)
    x = torch.randn(3, 16, requires_grad=True)
    out32 = ffn(x)
    out32.sum().backward()
    grad32 = x.grad.clone()
    x.grad = None
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = ffn(x)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    torch.testing.assert_close(out.float(), out32, atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(x.grad, grad32, atol=5e-2, rtol=5e-2)
