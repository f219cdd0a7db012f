"""Selective scan: the chunked scan equals the step-by-step recurrence (values and gradients), stays finite at
every chunk size, and the mamba_ssm dispatch hands the kernel its channels-first layout."""
import sys
import types

import pytest
import torch

from mmcausal.models.backbones.defocus import DefocusMambaMixer, ScanConfigError, chunked_selective_scan, selective_scan
from mmcausal.models.backbones.defocus.scan import _mamba_ssm_scan, mamba_ssm_kernel
from reference.official_defocus import sequential_scan


def _operands(length, batch=2, channels=6, states=4, delta_max=2.0, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape):
        return torch.rand(*shape, generator=generator, dtype=dtype)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=dtype)

    u, B, C = randn(batch, length, channels), randn(batch, length, states), randn(batch, length, states)
    delta = rand(batch, length, channels) * delta_max
    A = -(rand(channels, states) * 15 + 1)  # like A = -(1..16)
    return [t.requires_grad_() for t in (u, delta, A, B, C)]


@pytest.mark.parametrize('length,chunk_size', [(1, None), (7, None), (7, 3), (64, None), (64, 8), (197, None),
                                               (197, 16), (250, None), (250, 16), (5, 64)])
def test_chunked_scan_equals_the_recurrence_with_gradients(length, chunk_size):
    operands = _operands(length)
    expected = sequential_scan(*operands)
    actual = chunked_selective_scan(*operands, chunk_size=chunk_size)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(expected)
    for got, want in zip(torch.autograd.grad(actual, operands, grad), torch.autograd.grad(expected, operands, grad)):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('impl', ['chunked', 'sequential'])
def test_every_pure_pytorch_implementation_equals_the_oracle(impl):
    operands = _operands(23)
    torch.testing.assert_close(selective_scan(*operands, impl=impl), sequential_scan(*operands), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('length,chunk_size', [(64, 8), (7, 7)])
def test_chunked_scan_takes_each_decay_once_per_pass(length, chunk_size):
    """Forward and backward each take ``exp(delta_t A)`` once per position (plus one per-chunk decay when there are
    several chunks): ``2 L`` exponentials of that shape in all, not one per sweep."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class CountExp(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.calls += func is torch.ops.aten.exp.default
            return func(*args, **(kwargs or {}))

    operands = _operands(length)
    with CountExp() as counter:
        chunked_selective_scan(*operands, chunk_size=chunk_size).sum().backward()
    chunk_decays = 2 if length > chunk_size else 0
    assert counter.calls == 2 * chunk_size + chunk_decays
    # without grad the forward keeps no decay of every position (a (b, L, E, N) peak at long sequences): the
    # third step takes them again
    with CountExp() as counter, torch.no_grad():
        chunked_selective_scan(*operands, chunk_size=chunk_size)
    assert counter.calls == (2 * chunk_size + 1 if length > chunk_size else chunk_size)


def test_chunked_scan_passes_gradcheck():
    u, delta, A, B, C = _operands(11, batch=1, channels=3, states=2)
    assert torch.autograd.gradcheck(lambda *x: chunked_selective_scan(*x, chunk_size=4), (u, delta, A, B, C))


@pytest.mark.parametrize('chunk_size', [1, 4, 16, 64, 300])
def test_chunked_scan_is_finite_with_strong_decays_at_every_chunk_size(chunk_size):
    # delta up to 20 and |A| up to 16: a chunk's decay reaches exp(-300 * chunk); closed-form CPU scans that divide by
    # decays overflow here
    operands = _operands(300, delta_max=20.0, dtype=torch.float32)
    actual = chunked_selective_scan(*operands, chunk_size=chunk_size)
    actual.sum().backward()
    assert torch.isfinite(actual).all() and all(torch.isfinite(t.grad).all() for t in operands)
    torch.testing.assert_close(actual, sequential_scan(*operands), rtol=1e-4, atol=1e-4)


def test_bf16_inputs_keep_an_fp32_state_and_match():
    operands = _operands(97, dtype=torch.float32)
    actual = chunked_selective_scan(*(t.bfloat16() for t in operands))
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, sequential_scan(*(t.bfloat16() for t in operands)), rtol=1e-4, atol=1e-4)


def test_autocast_does_not_lower_the_scan_precision():
    operands = _operands(50, dtype=torch.float32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        actual = chunked_selective_scan(*operands)
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, chunked_selective_scan(*operands), rtol=0, atol=0)


def test_bad_settings_are_user_errors():
    operands = _operands(5)
    with pytest.raises(ScanConfigError, match='chunk_size'):
        chunked_selective_scan(*operands, chunk_size=0)
    with pytest.raises(ScanConfigError, match='chunk_size'):
        DefocusMambaMixer(32, chunk_size=2.5)
    with pytest.raises(ScanConfigError, match='scan_impl'):
        selective_scan(*operands, impl='cuda')


@pytest.fixture
def fake_mamba_ssm(monkeypatch):
    """A stand-in ``mamba_ssm.ops.selective_scan_interface`` whose kernel is the recurrence in mamba_ssm's layout:
    u, delta (b, E, L), A (E, N), B, C (b, N, L) -> (b, E, L)."""
    calls = []
    mamba_ssm_kernel.cache_clear()

    def selective_scan_fn(u, delta, A, B, C, delta_softplus=False):
        assert len({t.dtype for t in (u, delta, B, C)}) == 1, 'the kernel needs u, delta, B, C in one dtype'
        calls.append(dict(shapes=[tuple(t.shape) for t in (u, delta, A, B, C)], delta_softplus=delta_softplus))
        return sequential_scan(u.transpose(1, 2), delta.transpose(1, 2), A, B.transpose(1, 2),
                               C.transpose(1, 2)).transpose(1, 2)

    interface = types.ModuleType('mamba_ssm.ops.selective_scan_interface')
    interface.selective_scan_fn, interface.selective_scan_cuda = selective_scan_fn, object()
    for name, module in (('mamba_ssm', types.ModuleType('mamba_ssm')),
                         ('mamba_ssm.ops', types.ModuleType('mamba_ssm.ops')),
                         ('mamba_ssm.ops.selective_scan_interface', interface)):
        monkeypatch.setitem(sys.modules, name, module)
    sys.modules['mamba_ssm.ops'].selective_scan_interface = interface
    sys.modules['mamba_ssm'].ops = sys.modules['mamba_ssm.ops']
    yield calls
    mamba_ssm_kernel.cache_clear()


def test_mamba_ssm_kernel_gets_its_layout_one_dtype_and_the_same_result(fake_mamba_ssm):
    u, delta, A, B, C = _operands(9, channels=6, states=4, dtype=torch.float32)
    with torch.autocast('cpu', dtype=torch.bfloat16):  # u, B, C come in bf16 under AMP, delta in fp32
        actual = _mamba_ssm_scan(mamba_ssm_kernel(), u.bfloat16(), delta, A, B.bfloat16(), C.bfloat16())
    assert fake_mamba_ssm == [dict(shapes=[(2, 6, 9), (2, 6, 9), (6, 4), (2, 4, 9), (2, 4, 9)], delta_softplus=False)]
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, sequential_scan(u.bfloat16(), delta, A, B.bfloat16(), C.bfloat16()))


def test_auto_uses_the_kernel_only_for_cuda_tensors(fake_mamba_ssm):
    selective_scan(*_operands(9), impl='auto')
    assert fake_mamba_ssm == []  # CPU tensors: the chunked scan
    with pytest.raises(ScanConfigError, match='CUDA tensors only'):
        selective_scan(*_operands(9), impl='mamba_ssm')


def test_missing_kernel_extension_is_a_clear_error(monkeypatch):
    mamba_ssm_kernel.cache_clear()
    interface = types.ModuleType('mamba_ssm.ops.selective_scan_interface')
    interface.selective_scan_cuda = None  # mamba_ssm installed without its CUDA extension
    monkeypatch.setitem(sys.modules, 'mamba_ssm', types.ModuleType('mamba_ssm'))
    monkeypatch.setitem(sys.modules, 'mamba_ssm.ops', types.ModuleType('mamba_ssm.ops'))
    monkeypatch.setitem(sys.modules, 'mamba_ssm.ops.selective_scan_interface', interface)
    sys.modules['mamba_ssm.ops'].selective_scan_interface = interface
    with pytest.raises(ScanConfigError, match='mamba-ssm'):
        selective_scan(*_operands(3), impl='mamba_ssm')
    assert torch.isfinite(selective_scan(*_operands(3), impl='auto')).all()
    mamba_ssm_kernel.cache_clear()
