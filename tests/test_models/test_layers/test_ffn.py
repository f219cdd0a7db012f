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


def test_swiglu_matches_formula_and_its_gradients():
    """``w3(silu(x W1) * (x W2))`` (Shazeer 2020, eq. 6) in float64 autograd: values and every gradient."""
    ffn = SwiGLUFFN(16, feedforward_channels=24, bias=True, add_identity=False).double()
    x = torch.randn(2, 5, 16, dtype=torch.float64, requires_grad=True)
    grad_out = torch.randn(2, 5, 16, dtype=torch.float64)
    ffn(x).backward(grad_out)

    x_ref = x.detach().requires_grad_()
    w12, b12 = (p.detach().clone().requires_grad_() for p in (ffn.w12.weight, ffn.w12.bias))
    w3, b3 = (p.detach().clone().requires_grad_() for p in (ffn.w3.weight, ffn.w3.bias))
    x1, x2 = (x_ref @ w12.T + b12).chunk(2, dim=-1)
    out_ref = (x1 * torch.sigmoid(x1) * x2) @ w3.T + b3
    out_ref.backward(grad_out)
    torch.testing.assert_close(ffn(x), out_ref)
    for got, want in ((x.grad, x_ref.grad), (ffn.w12.weight.grad, w12.grad), (ffn.w12.bias.grad, b12.grad),
                      (ffn.w3.weight.grad, w3.grad)):
        torch.testing.assert_close(got, want)


def test_swiglu_backward_keeps_three_hidden_widths_per_token():
    """Saved for backward: the input, the ``w12`` output (2h) and the ``w3`` input (h) per token; plain autograd
    also keeps ``silu(x1)`` (4h; the pyramid backbone then peaked at 1.25x Twins-SVT's memory)."""
    tokens, dims, hidden = 64, 16, 40
    ffn = SwiGLUFFN(dims, feedforward_channels=hidden, bias=False, add_identity=False)
    x = torch.randn(1, tokens, dims) * 1
    saved = {}
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.setdefault(t.data_ptr(), t.numel()) and t,
                                                  lambda t: t):
        ffn(x)
    activations = sum(n for n in saved.values() if n >= tokens * dims)
    assert activations == tokens * (dims + 3 * hidden), (activations, tokens * (dims + 3 * hidden))


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
