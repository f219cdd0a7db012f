"""Selective scan: the chunked scan, the CPU kernel and the Triton kernels equal the step-by-step recurrence (values
and gradients) and stay finite; the kernels keep no per-token state for backward; the dispatch takes the CPU kernel
for CPU tensors (the chunked scan when it does not build), the Triton kernels for CUDA tensors, and hands the
mamba_ssm kernel its channels-first layout. Without a GPU the Triton kernels run in Triton's interpreter."""
import functools
import json
import platform
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from mmcausal.models.defocus import DefocusMambaMixer, ScanConfigError, chunked_selective_scan, selective_scan
from mmcausal.models.defocus import mamba as scan
from mmcausal.models.defocus.mamba import _mamba_ssm_scan, mamba_ssm_kernel
from mmcausal.models.defocus.scans import cpu as cpu_scan
from mmcausal.models.defocus.scans import triton as triton_scan
from mmcausal.models.defocus.scans.cpu import SEGMENT, compiler_flags, cpu_kernel_selective_scan
from mmcausal.models.defocus.scans.segsum import segsum_selective_scan
from mmcausal.models.defocus.scans.triton import SEGMENT as TRITON_SEGMENT
from mmcausal.models.defocus.scans.triton import triton_selective_scan
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


def _assert_equals_the_recurrence(actual, operands):
    """``actual`` (a scan of fp64 ``operands``) and its gradients equal the step-by-step oracle's."""
    expected = sequential_scan(*operands)
    torch.testing.assert_close(actual, expected, rtol=1e-10, atol=1e-10)
    grad = torch.randn_like(expected)
    for got, want in zip(torch.autograd.grad(actual, operands, grad), torch.autograd.grad(expected, operands, grad)):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize('length,chunk_size', [(1, None), (7, None), (7, 3), (64, None), (64, 8), (197, None),
                                               (197, 16), (250, None), (250, 16), (5, 64)])
def test_chunked_scan_equals_the_recurrence_with_gradients(length, chunk_size):
    operands = _operands(length)
    _assert_equals_the_recurrence(chunked_selective_scan(*operands, chunk_size=chunk_size), operands)


@pytest.mark.parametrize('impl', ['chunked', 'sequential', 'cpu_kernel'])
def test_every_cpu_implementation_equals_the_oracle(impl):
    operands = _operands(23)
    torch.testing.assert_close(selective_scan(*operands, impl=impl), sequential_scan(*operands), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize('length,channels,states', [(1, 6, 4), (SEGMENT - 1, 5, 3), (SEGMENT, 8, 4),
                                                     (SEGMENT + 1, 9, 16), (3 * SEGMENT + 5, 17, 5), (197, 64, 16)])
def test_cpu_kernel_equals_the_recurrence_with_gradients(length, channels, states):
    """Lengths around the kernel's segment (the states it keeps for backward), channel counts that are no multiple of
    the vector width, fp64."""
    operands = _operands(length, channels=channels, states=states)
    _assert_equals_the_recurrence(cpu_kernel_selective_scan(*operands), operands)


def test_cpu_kernel_passes_gradcheck_and_is_finite_with_strong_decays():
    assert torch.autograd.gradcheck(cpu_kernel_selective_scan, _operands(40, batch=1, channels=3, states=2))
    operands = _operands(300, delta_max=20.0, dtype=torch.float32)
    actual = cpu_kernel_selective_scan(*operands)
    actual.sum().backward()
    assert torch.isfinite(actual).all() and all(torch.isfinite(t.grad).all() for t in operands)
    torch.testing.assert_close(actual, sequential_scan(*operands), rtol=1e-4, atol=1e-4)


def test_cpu_kernel_gradients_agree_at_every_thread_count():
    """B's and C's gradients sum over channel blocks that the threads share (one partial sum per thread, so the
    order of the sum, not the value, depends on the thread count)."""
    operands = _operands(70, channels=64, states=16)
    grad = torch.randn(2, 70, 64, dtype=torch.float64)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 3):
            torch.set_num_threads(count)
            results.append(torch.autograd.grad(cpu_kernel_selective_scan(*operands), operands, grad))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_cpu_kernel_keeps_no_per_token_state_for_backward():
    """Saved for backward: the operands and the state every SEGMENT tokens, never a (b, L, E, N) tensor."""
    batch, length, channels, states = 2, 8 * SEGMENT, 32, 16
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        cpu_kernel_selective_scan(*_operands(length, batch=batch, channels=channels, states=states,
                                             dtype=torch.float32))
    assert max(saved) <= batch * length * channels
    assert sum(saved) < batch * length * channels * states / 4


def test_cpu_kernel_keeps_an_fp32_state_under_bf16_and_autocast():
    operands = _operands(97, dtype=torch.float32)
    actual = cpu_kernel_selective_scan(*(t.bfloat16() for t in operands))
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, sequential_scan(*(t.bfloat16() for t in operands)), rtol=1e-4, atol=1e-4)
    # under bf16 autocast, on fp32 operands and on those an AMP model hands the scan (u, B, C out of bf16 linears,
    # delta and A in fp32): the fp32 recurrence of the same values, computed outside autocast. 1e-5 leaves room for
    # fp32 summation order (2e-6 seen on outputs up to 25); rounding the operands or the state to bf16 is off by 6e-2
    amp_operands = [operands[0].bfloat16(), operands[1], operands[2], operands[3].bfloat16(), operands[4].bfloat16()]
    for inputs in (operands, amp_operands):
        with torch.autocast('cpu', dtype=torch.bfloat16):
            actual = cpu_kernel_selective_scan(*inputs)
        assert actual.dtype == torch.float32
        expected = sequential_scan(*(t.detach().float() for t in inputs))
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_cpu_kernel_compiles_into_one_graph():
    operands = _operands(45, dtype=torch.float32)
    compiled = torch.compile(selective_scan, backend='eager', fullgraph=True)
    # fp32 rounding apart: on an AVX-512 host the kernel's vector path sums in another order for the operand layouts
    # of the traced graph (1e-6 seen), on AVX2 the two agree bit for bit
    torch.testing.assert_close(compiled(*operands), cpu_kernel_selective_scan(*operands), rtol=1e-5, atol=1e-5)


def test_auto_takes_the_cpu_kernel_on_cpu_and_the_chunked_scan_where_it_does_not_build(monkeypatch):
    operands = _operands(33)
    calls = []
    monkeypatch.setattr(scan, 'cpu_kernel_selective_scan', lambda *x: calls.append(1) or cpu_kernel_selective_scan(*x))
    selective_scan(*operands)
    assert calls == [1]
    monkeypatch.setattr(scan, 'cpu_scan_extension', lambda: (None, 'CalledProcessError: no compiler'))
    scan._warn_chunked_fallback.cache_clear()
    with pytest.warns(UserWarning, match='no compiler.*chunked PyTorch scan'):
        fallback = selective_scan(*operands)
    assert calls == [1]
    torch.testing.assert_close(fallback, chunked_selective_scan(*operands), rtol=0, atol=0)
    with pytest.raises(ScanConfigError, match='no compiler.*scan_impl="chunked"'):
        selective_scan(*operands, impl='cpu_kernel')
    scan._warn_chunked_fallback.cache_clear()


def test_a_compiled_scan_takes_the_chunked_scan_where_the_kernel_does_not_build(monkeypatch):
    """As in eager mode: a failed build is no error under torch.compile either."""
    operands = _operands(33, dtype=torch.float32)
    monkeypatch.setattr(scan, 'cpu_scan_extension', lambda: (None, 'CalledProcessError: no compiler'))
    torch._dynamo.reset()
    try:
        compiled = torch.compile(selective_scan, backend='eager', fullgraph=True)
        torch.testing.assert_close(compiled(*operands), chunked_selective_scan(*operands), rtol=0, atol=0)
    finally:
        torch._dynamo.reset()


def test_cpu_kernel_build_failure_is_one_line(monkeypatch):
    from torch.utils import cpp_extension

    def fail(**kwargs):  # what torch's builder raises: the whole ninja log, ending with ninja's own last word
        raise RuntimeError("Error building extension 'mmcausal_selective_scan_cpu_avx2': [1/2] c++ -MMD -MF x.o.d "
                           '-O3 -fopenmp -c selective_scan_cpu.cpp -o x.o\nFAILED: x.o\n'
                           'selective_scan_cpu.cpp:15:10: fatal error: omp.h: No such file or directory\n'
                           'compilation terminated.\nninja: build stopped: subcommand failed.\n')

    cpu_scan.cpu_scan_extension.cache_clear()
    monkeypatch.setattr(cpp_extension, 'load', fail)
    try:
        assert cpu_scan.cpu_scan_extension() == (
            None, 'RuntimeError: selective_scan_cpu.cpp:15:10: fatal error: omp.h: No such file or directory')
        with pytest.raises(cpu_scan.CPUScanUnavailable, match='omp.h.*scan_impl="chunked"'):
            cpu_scan._extension()
    finally:
        cpu_scan.cpu_scan_extension.cache_clear()


@pytest.mark.parametrize('capability,platform,expected', [
    ('AVX2', 'linux', ['-O3', '-mavx2', '-mfma', '-DCPU_CAPABILITY=AVX2', '-DCPU_CAPABILITY_AVX2', '-fopenmp']),
    ('AVX512', 'linux', ['-O3', '-mavx512f', '-mavx512bw', '-mavx512vl', '-mavx512dq', '-mfma',
                         '-DCPU_CAPABILITY=AVX512', '-DCPU_CAPABILITY_AVX512', '-fopenmp']),
    ('SVE256', 'linux', ['-O3', '-DCPU_CAPABILITY=DEFAULT', '-DCPU_CAPABILITY_DEFAULT', '-fopenmp']),
    ('DEFAULT', 'darwin', ['-O3', '-DCPU_CAPABILITY=DEFAULT', '-DCPU_CAPABILITY_DEFAULT']),
    ('AVX2', 'win32', ['/O2', '/openmp']),
])
def test_cpu_kernel_compiler_flags_follow_torch_cpu_capability(capability, platform, expected):
    assert compiler_flags(capability, platform) == expected


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


@pytest.mark.parametrize('length,chunk_size', [(1, 16), (7, 3), (16, 16), (17, 16), (197, 16), (250, 7)])
def test_segsum_scan_equals_the_chunked_scan_and_the_recurrence(length, chunk_size):
    """The closed form that exports take (no loop over the sequence): the same values as the chunked scan, for one
    chunk, whole and cut chunks."""
    operands = [t.detach() for t in _operands(length)]
    actual = segsum_selective_scan(*operands, chunk_size=chunk_size)
    torch.testing.assert_close(actual, chunked_selective_scan(*operands), rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(actual, sequential_scan(*operands), rtol=1e-10, atol=1e-10)


def test_segsum_scan_is_finite_with_strong_decays_and_long_sequences():
    """fp32, delta up to 20 (a chunk's decay down to exp(-5000)) and 3000 tokens of weak decays (188 chunks): every
    exponential is of a sum of non-positive log decays, so nothing over- or underflows into inf / nan."""
    for length, delta_max in ((300, 20.0), (3000, 0.05)):
        operands = [t.detach() for t in _operands(length, delta_max=delta_max, dtype=torch.float32)]
        actual = segsum_selective_scan(*operands)
        assert torch.isfinite(actual).all()
        torch.testing.assert_close(actual, chunked_selective_scan(*operands), rtol=1e-4, atol=1e-4)


def test_an_export_takes_the_segsum_scan_whatever_the_impl(monkeypatch):
    calls = []
    monkeypatch.setattr(scan, 'segsum_selective_scan', lambda *operands: calls.append(len(operands)) or 'segsum')
    monkeypatch.setattr(torch.compiler, 'is_exporting', lambda: True)
    operands = _operands(5)
    assert [selective_scan(*operands, impl=impl) for impl in ('auto', 'chunked', 'sequential')] == ['segsum'] * 3
    assert calls == [5] * 3


def test_segsum_scan_exports_one_graph_for_every_length():
    """torch.export with a symbolic token count (as the ONNX exporter's image size): the program traced at 40 tokens
    runs 17, 33 and 123 (the chunked scan's loop would have been unrolled at 40; the trace holds from 2 chunks on,
    one chunk is checked in ONNX Runtime by the De-focus Mamba export test)."""
    operands = [t.detach().float() for t in _operands(40)]
    tokens = torch.export.Dim.DYNAMIC
    program = torch.export.export(scan_module := _ScanModule(), tuple(operands), strict=False,
                                  dynamic_shapes=({1: tokens}, {1: tokens}, None, {1: tokens}, {1: tokens}))
    for length in (17, 33, 123):
        others = [t.detach().float() for t in _operands(length, seed=length)]
        torch.testing.assert_close(program.module()(*others), scan_module(*others), rtol=1e-5, atol=1e-5)


class _ScanModule(torch.nn.Module):
    def forward(self, u, delta, A, B, C):
        return selective_scan(u, delta, A, B, C, impl='chunked')


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


@pytest.mark.parametrize('impl', ['chunked', 'sequential'])
def test_autocast_does_not_lower_the_scan_precision(impl):
    # fp32 operands under bf16 autocast: the scan must stay at fp32 accuracy against the fp64 recurrence of the
    # reference (a bf16 step anywhere would cost ~1e-2)
    operands = _operands(50, dtype=torch.float32)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        actual = selective_scan(*operands, impl=impl)
    assert actual.dtype == torch.float32
    expected = sequential_scan(*(t.double() for t in operands)).float()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_bad_settings_are_user_errors():
    operands = _operands(5)
    with pytest.raises(ScanConfigError, match='chunk_size'):
        chunked_selective_scan(*operands, chunk_size=0)
    with pytest.raises(ScanConfigError, match='chunk_size'):
        DefocusMambaMixer(32, chunk_size=2.5)
    with pytest.raises(ScanConfigError, match='scan_impl'):
        selective_scan(*operands, impl='cuda')
    meta = [torch.empty(t.shape, device='meta') for t in operands]
    with pytest.raises(ScanConfigError, match='CPU tensors only'):
        selective_scan(*meta, impl='cpu_kernel')


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
    assert fake_mamba_ssm == []  # CPU tensors: the CPU kernel
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


def _require_triton() -> None:
    if not triton_scan.triton_available():
        if sys.platform == 'linux' and platform.machine() == 'x86_64':
            pytest.fail('triton is missing: it ships with torch on Linux x86-64 (tools/setup_env.sh installs it)')
        pytest.skip('no triton on this platform')


@pytest.fixture
def triton_device() -> str:
    """Where the Triton scan's kernels run: compiled on a GPU, or on CPU tensors in Triton's interpreter
    (``TRITON_INTERPRET=1``, which conftest.py sets where there is no GPU). Triton ships with torch on Linux x86-64
    (what CI runs), so there its absence fails these tests instead of skipping them."""
    _require_triton()
    if triton_scan.interpreting():
        return 'cpu'
    if not torch.cuda.is_available():
        pytest.skip('no GPU and not in Triton\'s interpreter (TRITON_INTERPRET=1 before Python starts)')
    return 'cuda'


@pytest.mark.e2e  # four GPU compilations: about 7 s
def test_triton_kernels_compile_for_a100_and_h100_without_spilling():
    """What the interpreter cannot show: both kernels, as the ops launch them, go through Triton's GPU compiler and
    ptxas for sm_80 and sm_90 (no GPU needed), and in fp32 (what training runs) keep their state in registers (no
    stack, i.e. no spills; fp64, which only the tests run, spills 12 bytes in the backward on sm_90 with Triton 3.6)."""
    _require_triton()
    tool = Path(__file__).resolve().parents[3] / 'tools' / 'analysis_tools' / 'triton_scan_resources.py'
    result = subprocess.run([sys.executable, str(tool), '--archs', '80', '90', '--json'], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert {(row['kernel'], row['dtype'], row['arch']) for row in rows} == {
        (kernel, dtype, arch) for kernel in ('forward', 'backward') for dtype in ('fp32', 'fp64')
        for arch in ('sm_80', 'sm_90')}
    assert all(row['num_warps'] == triton_scan.NUM_WARPS for row in rows)
    assert [row for row in rows if row['dtype'] == 'fp32' and row['stack_bytes']] == []


def _on(device, operands):
    return [t.detach().to(device).requires_grad_() for t in operands]


@pytest.mark.parametrize('length,channels,states', [(1, 6, 4), (TRITON_SEGMENT - 1, 5, 3), (TRITON_SEGMENT, 8, 4),
                                                     (TRITON_SEGMENT + 1, 40, 16), (3 * TRITON_SEGMENT + 5, 17, 5)])
def test_triton_scan_equals_the_recurrence_with_gradients(triton_device, length, channels, states):
    """Lengths around the kernel's segment, channel counts across program blocks with a masked tail, state counts
    that are no power of two (the kernel pads them), fp64."""
    operands = _on(triton_device, _operands(length, channels=channels, states=states))
    _assert_equals_the_recurrence(triton_selective_scan(*operands), operands)


def test_triton_scan_passes_gradcheck_is_finite_with_strong_decays_and_deterministic(triton_device):
    assert torch.autograd.gradcheck(triton_selective_scan, _on(triton_device, _operands(
        TRITON_SEGMENT + 2, batch=1, channels=2, states=2)), fast_mode=True)
    operands = _on(triton_device, _operands(150, delta_max=20.0, dtype=torch.float32))
    actual = triton_selective_scan(*operands)
    grad = torch.randn_like(actual)
    gradients = torch.autograd.grad(actual, operands, grad)
    assert torch.isfinite(actual).all() and all(torch.isfinite(g).all() for g in gradients)
    torch.testing.assert_close(actual, sequential_scan(*operands), rtol=1e-4, atol=1e-4)
    again = torch.autograd.grad(triton_selective_scan(*operands), operands, grad)  # no atomics: bit for bit
    assert all(torch.equal(a, b) for a, b in zip(again, gradients))


def test_triton_scan_keeps_no_per_token_state_and_an_fp32_state_under_bf16(triton_device):
    batch, length, channels, states = 1, 4 * TRITON_SEGMENT, 32, 16
    operands = _on(triton_device, _operands(length, batch=batch, channels=channels, states=states,
                                            dtype=torch.float32))
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t.numel()) or t, lambda t: t):
        triton_selective_scan(*operands)
    assert max(saved) <= batch * length * channels
    assert sum(saved) < batch * length * channels * states / 4
    short = _on(triton_device, _operands(40, dtype=torch.float32))
    with torch.autocast(triton_device, dtype=torch.bfloat16):
        actual = selective_scan(*(t.bfloat16() for t in short), impl='triton')
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, sequential_scan(*(t.bfloat16() for t in short)), rtol=1e-4, atol=1e-4)


def test_triton_scan_compiles_into_one_graph(triton_device):
    operands = _on(triton_device, _operands(37, dtype=torch.float32))
    torch._dynamo.reset()
    try:
        compiled = torch.compile(functools.partial(selective_scan, impl='triton'), backend='eager', fullgraph=True)
        actual = compiled(*operands)
        actual.sum().backward()
    finally:
        torch._dynamo.reset()
    torch.testing.assert_close(actual, triton_selective_scan(*operands), rtol=0, atol=0)
    assert all(t.grad is not None for t in operands)


def test_triton_scan_runs_in_the_mixer(triton_device):
    torch.manual_seed(0)
    mixer = DefocusMambaMixer(32, scan_impl='triton').to(triton_device)
    x = torch.randn(2, 23, 32, device=triton_device, requires_grad=True)
    actual = mixer(x)
    actual.sum().backward()
    mixer.scan_impl = 'chunked'
    torch.testing.assert_close(actual, mixer(x), rtol=1e-5, atol=1e-5)


def test_triton_scan_where_it_cannot_run_or_with_operands_it_cannot_take_is_a_clear_error(monkeypatch):
    monkeypatch.delenv('TRITON_INTERPRET', raising=False)
    with pytest.raises(ScanConfigError, match=r'runs on CUDA tensors .*TRITON_INTERPRET=1.*got cpu tensors'):
        selective_scan(*_operands(5), impl='triton')
    monkeypatch.setattr(triton_scan, 'triton_available', lambda: False)
    with pytest.raises(ScanConfigError, match='needs the triton package'):
        selective_scan(*_operands(5), impl='triton')
    u, delta, A, B, C = _operands(5, channels=6, states=4)
    # the kernels read every operand with the strides of these shapes: other shapes are refused before a launch
    for operands, message in (((u, delta, A[:, :3], B, C), r'A of shape \(6, 4\).*got \(6, 3\)'),
                              ((u, delta[:, :4], A, B, C), r'delta of shape \(2, 5, 6\)'),
                              ((u[:, :0], delta, A, B, C), 'tokens >= 1')):
        with pytest.raises(triton_scan.TritonScanInputError, match=message):
            selective_scan(*operands, impl='triton')


def test_auto_takes_the_triton_scan_on_cuda_and_the_cpu_kernel_on_cpu(triton_device, monkeypatch):
    """CPU tensors never take the Triton scan unless asked (the interpreter is for tests, and slow); CUDA tensors
    do (a GPU host)."""
    calls = []
    monkeypatch.setattr(scan, 'triton_selective_scan', lambda *x: calls.append(1) or triton_selective_scan(*x))
    operands = _on(triton_device, _operands(9, dtype=torch.float32))
    selective_scan(*operands)
    assert calls == ([1] if triton_device == 'cuda' else [])
