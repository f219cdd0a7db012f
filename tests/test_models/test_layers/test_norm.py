"""RMSNorm: the registered module equals torch's ``nn.RMSNorm`` (values and gradients) and keeps one activation
for backward. Oracle: torch's own module (``x / sqrt(mean(x^2) + eps) * w``)."""
import pytest
import torch
from torch import nn

from mmcausal.models.layers import RMSNorm, build_norm_layer


@pytest.mark.parametrize('shape,normalized_shape', [((2, 5, 16), (16, )), ((3, 4, 6), (4, 6))])
@pytest.mark.parametrize('affine', [True, False])
def test_equals_torch_rmsnorm_in_values_and_gradients(shape, normalized_shape, affine):
    ours = RMSNorm(normalized_shape, eps=1e-6, elementwise_affine=affine).double()
    reference = nn.RMSNorm(normalized_shape, eps=1e-6, elementwise_affine=affine).double()
    if affine:
        with torch.no_grad():
            ours.weight.normal_()
            reference.weight.copy_(ours.weight)
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    out, expected = ours(x), reference(x)
    torch.testing.assert_close(out, expected)
    grad_out = torch.randn_like(out)
    for got, want in zip(torch.autograd.grad(out, [x, *ours.parameters()], grad_out),
                         torch.autograd.grad(expected, [x, *reference.parameters()], grad_out)):
        torch.testing.assert_close(got, want)


def test_reduced_precision_matches_torch_and_default_eps():
    """bf16 in, bf16 out, computed in fp32: at most one bf16 rounding step from torch's module."""
    torch.manual_seed(0)
    x = torch.randn(2, 7, 32).bfloat16()
    torch.testing.assert_close(RMSNorm(32)(x), nn.RMSNorm(32)(x), rtol=2 ** -7, atol=0)
    assert RMSNorm(32)(x).dtype == torch.bfloat16


@pytest.mark.parametrize('eps', [None, 1e-6])
def test_unbatched_input_and_default_eps_match_torch(eps):
    ours, reference = RMSNorm(8, eps=eps).double(), nn.RMSNorm(8, eps=eps).double()
    x = (torch.randn(8, dtype=torch.float64) * 1e-5).requires_grad_()  # small: eps matters
    torch.testing.assert_close(ours(x), reference(x))
    torch.testing.assert_close(torch.autograd.grad(ours(x).sum(), [x, ours.weight]),
                               torch.autograd.grad(reference(x).sum(), [x, reference.weight]))


def test_backward_keeps_one_activation_sized_tensor():
    """Ours keeps the input only. The control: torch composes RMSNorm on CPU (torch 2.14) and also keeps
    ``x * rstd``, 2 activation-sized tensors (should torch fuse it, the control fails, not our claim)."""
    x = torch.randn(4, 50, 64, requires_grad=True)

    def large_saved(norm):
        storages = set()

        def pack(tensor):
            if tensor.numel() >= x.numel():
                storages.add(tensor.untyped_storage().data_ptr())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            norm(x)
        return len(storages)

    assert large_saved(RMSNorm(64, eps=1e-6)) == 1
    assert large_saved(nn.RMSNorm(64, eps=1e-6)) == 2


def test_configs_build_ours():
    assert isinstance(build_norm_layer(dict(type='RMSNorm', eps=1e-6), 8), RMSNorm)
