"""The De-focus Mamba token mixer: Mamba's selective SSM with a learnable band-pass filter (De-focus Attention
Networks, Tao et al. 2024, Sec. 3.2; the released ``MambaMixer``, notes B1)."""
import math
from typing import Optional, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import check_choice
from ...layers import TokenLayout
from .learnable_rope import LearnableRoPE
from .scan import SCAN_IMPLS, ScanConfigError, check_chunk_size, selective_scan


class MixerConfigError(UserInputError, ValueError):
    """An invalid De-focus mixer size (e.g. a width that the norm groups do not divide)."""


def group_rms_norm(x: Tensor, group_size: int, eps: float = 1e-6) -> Tensor:
    """RMS norm over groups of ``group_size`` consecutive channels, no affine, in fp32: ``(..., E) -> (..., E)``."""
    groups = x.float().unflatten(-1, (-1, group_size))
    return (groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + eps)).flatten(-2)


def inverse_softplus(x: Tensor) -> Tensor:
    """``softplus^-1(x) = x + log(1 - exp(-x))`` for ``x > 0``."""
    return x + torch.log(-torch.expm1(-x))


class DefocusMambaMixer(BaseModule):
    """``(B, L, D) -> (B, L, D)`` (notes B1; ``E = expand * D``, ``N`` states, ``R`` = ``dt_rank``)::

        [u, z] = in_proj(x)                              # D -> 2E, no bias
        u = SiLU(causal depthwise conv_k(u))             # with bias
        [dt, B, C] = x_proj(u)                           # E -> R + 2N, no bias
        B, C = RoPE(B), RoPE(C)                          # learnable frequencies, positions t / position_scale
        Delta = softplus(dt_proj(dt)) / decay_scale      # R -> E
        y = scan(u, Delta, A = -exp(A_log), B, C)        # h_t = exp(Delta_t A) h_t-1 + Delta_t u_t B_t, y_t = h_t C_t
        out = out_proj((GroupRMS(y) + D * u) * SiLU(z))  # E -> D, no bias

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
        scan_impl, chunk_size: see :func:`~.scan.selective_scan`.
    """

    def __init__(self, embed_dims: int, expand: int = 2, state_dims: int = 16, dt_rank: int = 48,
                 conv_kernel: int = 4, norm_group_size: int = 64, rope: Optional[str] = 'unpaired',
                 legacy_bf16_rope: bool = False, scan_impl: str = 'auto', chunk_size: Optional[int] = None,
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
        self.A_log = nn.Parameter(torch.log(torch.arange(1, state_dims + 1, dtype=torch.float32)).repeat(inner, 1))
        self.D = nn.Parameter(torch.ones(inner))
        self.rope = LearnableRoPE(state_dims, rope, legacy_bf16_rope) if rope else None
        self.out_proj = nn.Linear(inner, embed_dims, bias=False)
        self._init_dt_proj()

    def _init_dt_proj(self) -> None:
        """``W_dt ~ U(+-R^-0.5)``; ``b_dt = softplus^-1(dt)`` with ``dt`` log-spaced over channels from 1e-3
        to 1e-1 (deterministic, as released; clamped >= 1e-4), so ``Delta`` starts in that range."""
        bound = self.dt_rank ** -0.5
        nn.init.uniform_(self.dt_proj.weight, -bound, bound)
        inner = self.dt_proj.out_features
        dt = torch.exp(torch.linspace(math.log(1e-3), math.log(1e-1), inner)).clamp(min=1e-4)
        with torch.no_grad():
            self.dt_proj.bias.copy_(inverse_softplus(dt))

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
        y = selective_scan(u, delta, -torch.exp(self.A_log.float()), B, C, self.scan_impl, self.chunk_size)
        if self.norm_group_size:
            y = group_rms_norm(y, self.norm_group_size)
        y = (y + self.D * u) * F.silu(z)
        return self.out_proj(y.type_as(x))

    def extra_repr(self) -> str:
        return f'state_dims={self.state_dims}, dt_rank={self.dt_rank}, scan_impl={self.scan_impl!r}'
