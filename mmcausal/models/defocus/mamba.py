"""The De-focus Mamba token mixer: Mamba's selective SSM with a learnable band-pass filter (De-focus Attention
Networks, Tao et al. 2024, Sec. 4.1 and 4.3; the released ``MambaMixer`` in ``classification/models/mamba_block.py``).

:class:`DefocusMamba` stacks ``x + DropPath(Mixer(RMSNorm(x)))`` blocks (no FFN, no position embedding, final
LayerNorm). The mixer's selective scan (Mamba's S6 recurrence, Gu & Dao 2023, Alg. 2), for every channel ``e`` and
state dim ``n`` (diagonal, real ``A``)::

    h_t = exp(delta_t,e * A_e,n) * h_{t-1} + delta_t,e * u_t,e * B_t,n
    y_t,e = sum_n h_t,e,n * C_t,n

:func:`sequential_selective_scan` is the recurrence as written, the reference; :func:`selective_scan`, the one entry
point, picks a fast path of :mod:`.scans` that computes it: the Triton kernels for CUDA tensors (Triton ships with
torch's CUDA builds), the C++ kernel for CPU tensors (built on first use), the chunked PyTorch scan everywhere else
(a jit trace, or where neither kernel is available) and the closed form over chunks in an export (``torch.export``,
ONNX: one graph for every sequence length). ``mamba_ssm``'s CUDA kernel (the official code's) is taken when asked
for by name.
"""
import functools
import math
import warnings
from functools import partial
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from ..layers import TokenLayout, TransformerBlock
from .backbone import DefocusBackbone, LearnableRoPE, ScaleFactor
from .scans import ScanConfigError
from .scans.chunked import check_chunk_size, chunked_selective_scan
from .scans.cpu import cpu_kernel_selective_scan, cpu_scan_extension, not_built
from .scans.segsum import segsum_selective_scan
from .scans.triton import TritonScanUnavailable, compiling_for_gpu, triton_selective_scan


class MixerConfigError(UserInputError, ValueError):
    """An invalid De-focus mixer size (e.g. a width that the norm groups do not divide)."""


def group_rms_norm(x: Tensor, group_size: int, eps: float = 1e-6) -> Tensor:
    """RMS norm over groups of ``group_size`` consecutive channels, no affine, in fp32: ``(..., E) -> (..., E)``."""
    groups = x.float().unflatten(-1, (-1, group_size))
    return (groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + eps)).flatten(-2)


def inverse_softplus(x: Tensor) -> Tensor:
    """``softplus^-1(x) = x + log(1 - exp(-x))`` for ``x > 0``."""
    return x + torch.log(-torch.expm1(-x))


SCAN_IMPLS = ('auto', 'chunked', 'sequential', 'mamba_ssm', 'cpu_kernel', 'triton')
#: the mixer's state decay (None: no decay), paper Table 4(a)
DECAY_KINDS = ('data_dependent', 'learnable', 'fixed')


def initial_step_sizes(channels: int) -> Tensor:
    """The released initial step sizes ``dt_e``: log-spaced over the channels from 1e-3 to 1e-1, clamped >= 1e-4."""
    return torch.exp(torch.linspace(math.log(1e-3), math.log(1e-1), channels)).clamp(min=1e-4)


def static_decay_log_rates(channels: int, state_dims: int) -> Tensor:
    """``A_log`` ``(E, N)`` of a data-independent decay ``exp(A)``, ``A = -exp(A_log) = -n dt_e``: the released
    model's initial decay ``exp(Delta A)`` at the initial step ``dt_e`` (:func:`initial_step_sizes`) and ``A = -n``."""
    states = torch.arange(1, state_dims + 1, dtype=torch.float32)
    return torch.log(initial_step_sizes(channels)[:, None] * states)


def sequential_selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The recurrence one token at a time under autograd (what ``mamba_ssm``'s ``selective_scan_ref`` does): the
    explicit reference. ``L`` Python steps, and autograd keeps every state; shapes and precision as
    :func:`chunked_selective_scan` (fp32 state and result, also under autocast)."""
    dtype = torch.promote_types(u.dtype, torch.float32)
    u, delta, B, C, A = (t.to(dtype) for t in (u, delta, B, C, A))
    state = u.new_zeros(u.shape[0], *A.shape)
    outputs = []
    with torch.autocast(u.device.type, enabled=False):  # autocast would run the h C products in bf16
        for index in range(u.shape[1]):
            inputs = (delta[:, index] * u[:, index]).unsqueeze(-1) * B[:, index].unsqueeze(-2)
            state = torch.addcmul(inputs, torch.exp(delta[:, index].unsqueeze(-1) * A), state)
            outputs.append(torch.matmul(state, C[:, index].unsqueeze(-1)).squeeze(-1))
    return torch.stack(outputs, dim=1)


@torch.compiler.assume_constant_result
def _triton_compiles_for_gpu() -> bool:
    """Whether Triton imports and compiles kernels for the GPU (not its interpreter); a constant to
    ``torch.compile``, which calls it once while it traces."""
    return compiling_for_gpu()


@functools.lru_cache(maxsize=None)
def mamba_ssm_kernel() -> Optional[Callable]:
    """``mamba_ssm``'s ``selective_scan_fn`` if the package *and* its compiled CUDA extension are installed.

    Since mamba_ssm 2.2.5 the extension is optional at install time; the module then imports but its
    ``selective_scan_cuda`` is None, so importability alone is not enough.
    """
    try:
        from mamba_ssm.ops import selective_scan_interface as interface
    except ImportError:
        return None
    if getattr(interface, 'selective_scan_cuda', None) is None:
        return None
    return interface.selective_scan_fn


def _mamba_ssm_scan(kernel: Callable, u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor) -> Tensor:
    """The same scan through ``mamba_ssm``'s kernel (channels-first layout), returned ``(B, L, E)`` fp32.

    The kernel needs ``u``, ``delta``, ``B`` and ``C`` in one dtype: all go in as fp32 (its state is fp32 anyway),
    outside autocast, so a bf16-autocast training step passes them consistently."""
    def channels_first(x: Tensor) -> Tensor:
        return x.float().transpose(1, 2).contiguous()

    with torch.autocast(u.device.type, enabled=False):
        y = kernel(channels_first(u), channels_first(delta), A.float(), channels_first(B), channels_first(C),
                   delta_softplus=False)
    return y.transpose(1, 2).float()


@torch.compiler.assume_constant_result
def _cpu_kernel_built() -> bool:
    """Whether the CPU kernel is built (building it if needed); a constant to ``torch.compile``, which calls it once
    while it traces."""
    return cpu_scan_extension()[0] is not None


def _takes_cpu_kernel(impl: str) -> bool:
    """Whether a CPU scan takes the CPU kernel: always for ``'cpu_kernel'`` (a :class:`ScanConfigError` if it cannot
    be built); for ``'auto'`` if it builds (else a warning, once, and the chunked scan; a compiled graph takes the
    chunked scan without the warning)."""
    if torch.compiler.is_compiling():
        return impl == 'cpu_kernel' or _cpu_kernel_built()
    module, reason = cpu_scan_extension()
    if module is not None:
        return True
    if impl == 'cpu_kernel':
        raise ScanConfigError(f'scan_impl="cpu_kernel": {not_built(reason)}; use scan_impl="chunked".')
    _warn_chunked_fallback(reason)
    return False


@functools.lru_cache(maxsize=None)
def _warn_chunked_fallback(reason: str) -> None:
    message = not_built(reason)
    warnings.warn(f'{message[0].upper()}{message[1:]}. De-focus Mamba runs the chunked PyTorch scan instead '
                  '(several times slower).')


def selective_scan(u: Tensor, delta: Tensor, A: Tensor, B: Tensor, C: Tensor, impl: str = 'auto',
                   chunk_size: Optional[int] = None) -> Tensor:
    """``y = scan(u, delta, A, B, C)`` (module docstring); shapes as :func:`chunked_selective_scan`.

    Args:
        impl: ``'auto'`` (CUDA tensors: the Triton kernels, ``mamba_ssm`` if installed where Triton is not;
            CPU tensors: the CPU kernel, chunked if it does not build; chunked in a jit trace),
            ``'chunked'``, ``'sequential'`` (the explicit reference), ``'triton'`` (also on CPU tensors under
            Triton's interpreter, ``TRITON_INTERPRET=1``), ``'mamba_ssm'`` or ``'cpu_kernel'`` (required; a clear
            error if unavailable).
        chunk_size: chunk length of the chunked scan (the kernels do not take it).

    Under ``torch.export`` (ONNX export) every ``impl`` runs :func:`~.segsum_scan.segsum_selective_scan`: standard
    ops and no loop over the sequence, so the graph takes any token count (the kernels are custom ops, the chunked
    and sequential scans loops that the export would unroll at the traced length).
    """
    if impl not in SCAN_IMPLS:  # the mixer checked its own setting when it was built
        check_choice('scan_impl', impl, SCAN_IMPLS, ScanConfigError)
    if torch.compiler.is_exporting():  # one graph for every token count: the closed form, no loop over L
        return segsum_selective_scan(u, delta, A, B, C)
    if impl == 'sequential':
        return sequential_selective_scan(u, delta, A, B, C)
    if impl == 'cpu_kernel' and u.device.type != 'cpu':
        raise ScanConfigError(f'scan_impl="cpu_kernel" runs on CPU tensors only, got {u.device}; use '
                              'scan_impl="auto" on this device.')
    # a jit trace gets the chunked scan: standard ops, no custom op in the graph
    traced = torch.jit.is_tracing()
    if impl == 'triton':
        try:
            return triton_selective_scan(u, delta, A, B, C)
        except TritonScanUnavailable as error:
            raise ScanConfigError(str(error)) from None
    if impl == 'auto' and u.is_cuda and not traced and _triton_compiles_for_gpu():
        return triton_selective_scan(u, delta, A, B, C)
    on_cpu = u.device.type == 'cpu' and not traced
    if (impl == 'cpu_kernel' or impl == 'auto' and on_cpu) and _takes_cpu_kernel(impl):
        return cpu_kernel_selective_scan(u, delta, A, B, C)
    # only a CUDA scan looks for mamba_ssm (an import attempt would also break a torch.compile graph)
    kernel = mamba_ssm_kernel() if impl == 'mamba_ssm' or impl == 'auto' and u.is_cuda else None
    if impl == 'mamba_ssm' and kernel is None:
        raise ScanConfigError('scan_impl="mamba_ssm" needs mamba_ssm with its CUDA extension (pip install '
                              'mamba-ssm); use scan_impl="auto" for the Triton or the pure PyTorch scan.')
    if impl == 'mamba_ssm' and not u.is_cuda:
        raise ScanConfigError(f'scan_impl="mamba_ssm" runs on CUDA tensors only, got {u.device}; use '
                              'scan_impl="auto" or "chunked" on this device.')
    if kernel is not None and u.is_cuda:
        return _mamba_ssm_scan(kernel, u, delta, A, B, C)
    return chunked_selective_scan(u, delta, A, B, C, chunk_size)


class DefocusMambaMixer(BaseModule):
    """``(B, L, D) -> (B, L, D)`` (the released ``MambaMixer``; ``E = expand * D``, ``N`` states, ``R`` = ``dt_rank``)::

        [u, z] = in_proj(x)                              # D -> 2E, no bias
        u = SiLU(causal depthwise conv_k(u))             # with bias
        [dt, B, C] = x_proj(u)                           # E -> R + 2N, no bias
        B, C = RoPE(B), RoPE(C)                          # learnable frequencies, positions t / position_scale
        Delta = softplus(dt_proj(dt)) / decay_scale      # R -> E
        y = scan(u, Delta, A = -exp(A_log), B, C)        # h_t = exp(Delta_t A) h_t-1 + Delta_t u_t B_t, y_t = h_t C_t
        out = out_proj((GroupRMS(y) + D * u) * SiLU(z))  # E -> D, no bias

    The ``decay`` options of the paper's ablation (Table 4(a)) change only the decay of the scan: ``exp(A / s)``
    (learnable or fixed, data-independent) or none, with ``Delta_t`` kept as the input gate (:meth:`decay_rates`).

    Official parameter names (``in_proj``, ``conv1d``, ``x_proj``, ``dt_proj``, ``A_log``, ``D``, ``out_proj``;
    ``freq`` is ``rope.freq``). ``position_scale`` / ``decay_scale`` come from the :class:`TokenLayout` (the
    official ``rope_scale_factor`` / ``delta_scale_factor``).

    Args:
        embed_dims: ``D``.
        expand: ``E / D``.
        state_dims: ``N``.
        dt_rank: ``R``.
        conv_kernel: causal conv width.
        norm_group_size: channels per GroupRMS group (0 = no norm).
        rope: ``'unpaired'`` (released weights), ``'paired'`` (a true rotation) or None (no RoPE on B/C).
        legacy_bf16_rope: official bf16 angle rounding in training, see :class:`LearnableRoPE`.
        rope_learnable: train the RoPE frequencies (released); False keeps them fixed (paper Table 4(a)).
        decay: the state decay of the scan (the low-pass half of the band-pass filter, paper Table 4(a)):
            ``'data_dependent'`` (released: ``exp(Delta_t A)``), ``'learnable'`` (``exp(A / s)``, one learnable
            rate per channel and state, Delta = 1 in the decay as in De-focus ViT, paper Fig. 2),
            ``'fixed'`` (the same rates, not trained) or None (no decay: ``h_t = h_t-1 + Delta_t u_t B_t``).
            See :meth:`decay_rates`.
        scan_impl, chunk_size: see :func:`~.scan.selective_scan`.
    """

    def __init__(self, embed_dims: int, expand: int = 2, state_dims: int = 16, dt_rank: int = 48,
                 conv_kernel: int = 4, norm_group_size: int = 64, rope: Optional[str] = 'unpaired',
                 legacy_bf16_rope: bool = False, rope_learnable: bool = True,
                 decay: Optional[str] = 'data_dependent', scan_impl: str = 'auto', chunk_size: Optional[int] = None,
                 init_cfg: Optional[Union[dict, list]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        inner = expand * embed_dims
        if norm_group_size and inner % norm_group_size:
            raise MixerConfigError(f'The inner width {inner} (expand x embed_dims) must be a multiple of '
                                   f'norm_group_size={norm_group_size}.')
        self.state_dims, self.dt_rank, self.norm_group_size = state_dims, dt_rank, norm_group_size
        self.scan_impl = check_choice('scan_impl', scan_impl, SCAN_IMPLS, ScanConfigError)
        check_chunk_size(chunk_size)
        self.chunk_size = chunk_size
        self.in_proj = nn.Linear(embed_dims, 2 * inner, bias=False)
        self.conv1d = nn.Conv1d(inner, inner, conv_kernel, groups=inner, padding=conv_kernel - 1)
        self.x_proj = nn.Linear(inner, dt_rank + 2 * state_dims, bias=False)
        self.dt_proj = nn.Linear(dt_rank, inner)
        self.decay = None if decay is None else check_choice('decay', decay, DECAY_KINDS, MixerConfigError)
        if decay == 'data_dependent':
            self.A_log = nn.Parameter(torch.log(torch.arange(1, state_dims + 1, dtype=torch.float32)).repeat(inner, 1))
        elif decay == 'learnable':
            self.A_log = nn.Parameter(static_decay_log_rates(inner, state_dims))
        elif decay == 'fixed':
            self.register_buffer('A_log', static_decay_log_rates(inner, state_dims))
        self.D = nn.Parameter(torch.ones(inner))
        self.rope = LearnableRoPE(state_dims, rope, legacy_bf16_rope, rope_learnable) if rope else None
        self.out_proj = nn.Linear(inner, embed_dims, bias=False)
        self._init_dt_proj()

    def _init_dt_proj(self) -> None:
        """``W_dt ~ U(+-R^-0.5)``; ``b_dt = softplus^-1(dt)`` with ``dt`` log-spaced over channels from 1e-3
        to 1e-1 (deterministic, as released; clamped >= 1e-4), so ``Delta`` starts in that range."""
        bound = self.dt_rank ** -0.5
        nn.init.uniform_(self.dt_proj.weight, -bound, bound)
        with torch.no_grad():
            self.dt_proj.bias.copy_(inverse_softplus(initial_step_sizes(self.dt_proj.out_features)))

    def decay_rates(self, delta: Tensor, decay_scale: float = 1.) -> Tuple[Tensor, Tensor]:
        """``(step, rates)`` such that the scan's decay ``exp(step_t * rates)`` is this mixer's ``decay``:
        ``(Delta, A)`` (data-dependent), or ``(1, A / s)`` with ``A = -exp(A_log)`` (learnable / fixed), or
        ``(1, 0)`` (none). ``delta`` ``(B, L, E)`` is ``Delta`` (already divided by ``s = decay_scale``)."""
        if self.decay == 'data_dependent':
            return delta, -torch.exp(self.A_log.float())
        if self.decay is None:
            rates = delta.new_zeros(delta.shape[-1], self.state_dims)
        else:
            rates = -torch.exp(self.A_log.float()) / decay_scale
        return torch.ones_like(delta), rates

    def init_weights(self) -> None:
        """After the backbone's Linear init (TruncNormal 0.02, which reaches ``dt_proj`` too), restore the
        ``dt_proj`` init; ``A_log``, ``D`` and the RoPE frequencies keep their deterministic values."""
        super().init_weights()
        self._init_dt_proj()

    def forward(self, x: Tensor, layout: Optional[TokenLayout] = None) -> Tensor:
        position_scale = layout.position_scale if layout is not None else 1.
        decay_scale = layout.decay_scale if layout is not None else 1.
        length = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        # contiguous (b, L, E) rows, as the CPU scan kernel reads them (silu then saves this copy, not the conv output)
        u = F.silu(self.conv1d(u.transpose(1, 2))[..., :length].transpose(1, 2).contiguous())
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.state_dims, self.state_dims], dim=-1)
        if self.rope is not None:
            B, C = self.rope(B, C, position_scale=position_scale)
        delta = F.softplus(F.linear(dt, self.dt_proj.weight).float() + self.dt_proj.bias.float()) / decay_scale
        step, rates = self.decay_rates(delta, decay_scale)
        # a decay of its own keeps Delta_t as the input gate: h_t = exp(rates) h_t-1 + (Delta_t u_t) B_t
        scan_input = u if step is delta else delta * u
        y = selective_scan(scan_input, step, rates, B, C, self.scan_impl, self.chunk_size)
        if self.norm_group_size:
            y = group_rms_norm(y, self.norm_group_size)
        y = (y + self.D * u) * F.silu(z)
        return self.out_proj(y.type_as(x))

    def extra_repr(self) -> str:
        return (f'state_dims={self.state_dims}, dt_rank={self.dt_rank}, decay={self.decay!r}, '
                f'scan_impl={self.scan_impl!r}')


@MODELS.register_module()
class DefocusMamba(DefocusBackbone):
    """De-focus Mamba backbone.

    Args:
        arch: ``'small' | 'base' | 'large'`` (or ``s/b/l``), or a dict with ``embed_dims``, ``num_layers`` (and
            optionally ``expand`` 2, ``state_dims`` 16, ``dt_rank`` 48).
        img_size: the (pre-)training resolution: the reference of ``'auto'`` scaling and the section size of
            ``patch_rearrange``. Any input size runs (zero-padded bottom/right to a multiple of ``patch_size``).
        delta_scale_factor: Delta divisor (the official name); a number or ``'auto'`` (``r``).
        rope_scale_factor: RoPE position divisor; a number or ``'auto'`` (``r^2``).
        patch_rearrange: sectioned token order for inputs larger than ``img_size`` (the released detector); the
            padding to whole sections is dropped from every output, which is why ``out_type='raw'`` is refused.
        rope: RoPE on B/C: ``'unpaired'`` (released weights), ``'paired'`` or None.
        legacy_bf16_rope: round RoPE angles to bf16 in training, as the official training did.
        rope_learnable: train the RoPE frequencies (released) or keep them fixed (paper Table 4(a)).
        decay: ``'data_dependent'`` (released), ``'learnable'``, ``'fixed'`` or None: the scan's state decay, see
            :class:`DefocusMambaMixer` (paper Table 4(a)).
        norm_group_size: channels per GroupRMS group of the mixer output (0 = none).
        out_indices, out_type, frozen_stages, with_cp: as mmpretrain's ViT (``'raw'``: all tokens, cls last,
            in sequence order; ``'featmap'``: patches back in raster order, cropped to the input's grid).
        final_norm_cfg: the final norm (``LN`` eps 1e-6; the official detection backbone uses eps 1e-5).
        norm_cfg: the block norm (RMSNorm eps 1e-5).
        drop_path_rate: stochastic depth of the last block (linear from 0); a hook may schedule it.
        scan_impl, chunk_size: selective scan implementation, see :func:`~.scan.selective_scan`.
        mask_mode: ``'causal'`` only (module docstring).
    """
    refused_mask_modes = {
        'bidirectional': 'its selective scan is a causal recurrence by construction (the state at token t is built '
                         'from tokens s <= t only); seeing later tokens needs a second, backward scan, another model; '
                         'use "causal".',
        'official': "iLLaMA's post-softmax mask applies to softmax attention, and a selective scan has no softmax; "
                    'use "causal".'}
    arch_zoo = {
        ('s', 'small'): dict(embed_dims=384, num_layers=24),
        ('b', 'base'): dict(embed_dims=768, num_layers=24),
        ('l', 'large'): dict(embed_dims=1024, num_layers=48),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Tuple[int, int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 delta_scale_factor: ScaleFactor = 1.,
                 rope_scale_factor: ScaleFactor = 1.,
                 patch_rearrange: bool = False,
                 rope: Optional[str] = 'unpaired',
                 legacy_bf16_rope: bool = False,
                 rope_learnable: bool = True,
                 decay: Optional[str] = 'data_dependent',
                 norm_group_size: int = 64,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: str = 'cls_token',
                 final_norm: bool = True,
                 final_norm_cfg: Optional[dict] = None,
                 norm_cfg: Optional[dict] = None,
                 drop_path_rate: float = 0.,
                 scan_impl: str = 'auto',
                 chunk_size: Optional[int] = None,
                 mask_mode: str = 'causal',
                 frozen_stages: int = -1,
                 with_cp: bool = False,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        setting = self._build_stem(arch, ('embed_dims', 'num_layers'), in_channels, patch_size, img_size,
                                   delta_scale_factor, rope_scale_factor, patch_rearrange, out_indices, out_type,
                                   final_norm, frozen_stages, mask_mode)
        mixer = partial(DefocusMambaMixer, expand=setting.get('expand', 2), state_dims=setting.get('state_dims', 16),
                        dt_rank=setting.get('dt_rank', 48), norm_group_size=norm_group_size, rope=rope,
                        legacy_bf16_rope=legacy_bf16_rope, rope_learnable=rope_learnable, decay=decay,
                        scan_impl=scan_impl, chunk_size=chunk_size)
        norm_cfg = norm_cfg or dict(type='RMSNorm', eps=1e-5)
        self._build_blocks(partial(TransformerBlock, mixer=mixer, ffn=None, norm_cfg=norm_cfg),
                           final_norm_cfg or dict(type='LN', eps=1e-6), drop_path_rate, with_cp)
