"""The discrete noise schedule of DDPM (Ho et al. 2020) as IDDPM / ADM / DiT tabulate it, and respacing.

Every table is float64 (``(T,)``); a step ``t`` reads it as the sample's dtype (:meth:`NoiseSchedule.extract`), as
the official code does. The tables are computed on the CPU; each device gets one copy of them, made the first time a
step reads them there (:meth:`NoiseSchedule.tables_on`), so a training or sampling step copies nothing to the GPU.
A respaced schedule keeps a subset ``s_0 < s_1 < ...`` of the original steps: its betas are
``1 - abar[s_i] / abar[s_{i-1}]`` so that its cumulative products are the original ``abar[s_i]`` (the same marginals),
and the network still receives the original index ``s_i`` (``timestep_map``).
"""
import re
from typing import Dict, Hashable, List, Optional, Sequence, Union

import torch
from torch import Tensor

from mmcausal.utils.validation import ConfigValueError

Spacing = Union[int, str, Sequence[int]]


def linear_betas(num_timesteps: int, start: float = 1e-4, end: float = 0.02) -> Tensor:
    """DDPM's linear betas from ``start`` to ``end`` scaled by ``1000 / T`` (so other ``T`` keep the same range of
    noise), float64 ``(T,)``."""
    scale = 1000. / num_timesteps
    return torch.linspace(scale * start, scale * end, num_timesteps, dtype=torch.float64)


def space_timesteps(num_timesteps: int, spacing: Spacing) -> List[int]:
    """The original steps a respaced sampler keeps (sorted).

    * ``int`` N or ``'N'``: N steps spread evenly over ``[0, T-1]``, both ends kept: the rounded running sum of the
      stride ``(T-1) / (N-1)``, IDDPM's ``space_timesteps`` (250 of 1000: 0, 4, 8, ..., 245, 249, 253, ..., 995, 999,
      as DiT samples; ``round(i (T-1) / (N-1))`` for 250, one step apart at some counts such as 21);
    * ``'ddimN'``: the stride rule of DDIM, ``range(0, T, stride)`` with the stride giving exactly N steps;
    * a sequence (or comma-separated string) of counts: the ``T`` steps split in that many equal sections, each
      spread evenly as above (IDDPM's general form).
    """
    if isinstance(spacing, str) and spacing.startswith('ddim'):
        count = _positive_int(spacing[4:], spacing)
        for stride in range(1, num_timesteps):
            if len(range(0, num_timesteps, stride)) == count:
                return list(range(0, num_timesteps, stride))
        raise ConfigValueError(f'No integer stride gives {count} DDIM steps of {num_timesteps}; use another count.')
    if isinstance(spacing, str):
        sections = [_positive_int(part, spacing) for part in re.split(r'\s*,\s*', spacing.strip())]
    elif isinstance(spacing, int):
        sections = [_positive_int(spacing, spacing)]
    else:
        sections = [_positive_int(part, spacing) for part in spacing]
    size, extra = divmod(num_timesteps, len(sections))
    kept, start = [], 0
    for index, count in enumerate(sections):
        length = size + (index < extra)
        if count > length:
            raise ConfigValueError(f'Cannot keep {count} steps of a section of {length} ({num_timesteps} steps in '
                                   f'{len(sections)} sections); ask for fewer steps.')
        stride = (length - 1) / (count - 1) if count > 1 else 0.
        position = 0.  # summed stride by stride, as IDDPM does: at .5 ties it rounds unlike i * stride (21 steps)
        for _ in range(count):
            kept.append(start + round(position))
            position += stride
        start += length
    return kept


def _positive_int(value, spacing) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1:
        raise ConfigValueError(f'Invalid timestep spacing {spacing!r}: use a step count N, "ddimN" or a list of '
                               'per-section counts.')
    return number


class NoiseSchedule:
    """The tables of a DDPM schedule given its betas (float64 ``(T,)``), names as in IDDPM:

    ``alphas_cumprod`` (abar), ``alphas_cumprod_prev`` (abar of the step before, 1 before the first),
    ``sqrt_alphas_cumprod``, ``sqrt_one_minus_alphas_cumprod``, ``sqrt_recip_alphas_cumprod``,
    ``sqrt_recipm1_alphas_cumprod``, ``posterior_variance`` (beta~ = beta (1 - abar_prev) / (1 - abar)),
    ``posterior_log_variance_clipped`` (log beta~ with beta~_0 = 0 replaced by beta~_1), ``posterior_mean_coef1`` /
    ``coef2`` (the posterior mean ``coef1 x0 + coef2 x_t``), ``log_betas``, ``large_log_variance`` (log of the
    ``'large'`` fixed variance: beta_t, with beta~_1 at ``t = 0``).

    ``timestep_map[i]``: the original step of step ``i`` (what the network receives).

    The attributes stay CPU tensors; :meth:`tables_on` holds one copy per device (exact copies, float64).
    """

    #: the tables :meth:`extract` reads by name (and :meth:`tables_on` copies to a device)
    TABLES = ('betas', 'alphas_cumprod', 'alphas_cumprod_prev', 'sqrt_alphas_cumprod', 'sqrt_one_minus_alphas_cumprod',
              'sqrt_recip_alphas_cumprod', 'sqrt_recipm1_alphas_cumprod', 'posterior_variance',
              'posterior_log_variance_clipped', 'posterior_mean_coef1', 'posterior_mean_coef2', 'log_betas',
              'large_log_variance', 'timestep_map')

    def __init__(self, betas: Tensor, timestep_map: Optional[Sequence[int]] = None) -> None:
        betas = betas.to(torch.float64)
        if betas.dim() != 1 or not ((betas > 0) & (betas <= 1)).all():
            raise ConfigValueError('Betas must be a 1-D sequence in (0, 1].')
        self.num_timesteps = betas.shape[0]
        self.timestep_map = torch.tensor(list(range(self.num_timesteps)) if timestep_map is None else timestep_map)
        self.betas = betas
        alphas = 1. - betas
        self.alphas_cumprod = torch.cumprod(alphas, dim=0)
        self.alphas_cumprod_prev = torch.cat((torch.ones(1, dtype=torch.float64), self.alphas_cumprod[:-1]))
        self.sqrt_alphas_cumprod = self.alphas_cumprod.sqrt()
        self.sqrt_one_minus_alphas_cumprod = (1. - self.alphas_cumprod).sqrt()
        self.sqrt_recip_alphas_cumprod = (1. / self.alphas_cumprod).sqrt()
        self.sqrt_recipm1_alphas_cumprod = (1. / self.alphas_cumprod - 1.).sqrt()
        self.posterior_variance = betas * (1. - self.alphas_cumprod_prev) / (1. - self.alphas_cumprod)
        clipped = torch.cat((self.posterior_variance[1:2], self.posterior_variance[1:])) \
            if self.num_timesteps > 1 else betas
        self.posterior_log_variance_clipped = clipped.log()
        self.posterior_mean_coef1 = betas * self.alphas_cumprod_prev.sqrt() / (1. - self.alphas_cumprod)
        self.posterior_mean_coef2 = (1. - self.alphas_cumprod_prev) * alphas.sqrt() / (1. - self.alphas_cumprod)
        self.log_betas = betas.log()
        self.large_log_variance = torch.cat((self.posterior_variance[1:2], betas[1:])).log()
        self._device_tables: Dict[torch.device, Dict[str, Tensor]] = {}
        self._respaced: Dict[Hashable, 'NoiseSchedule'] = {}

    def respaced(self, spacing: Spacing) -> 'NoiseSchedule':
        """The schedule that keeps the steps :func:`space_timesteps` picks (indices into this schedule's steps); made
        once per ``spacing`` and reused (with its device copies) by later calls."""
        key = spacing if isinstance(spacing, (int, str)) else tuple(spacing)
        if key not in self._respaced:
            kept = space_timesteps(self.num_timesteps, spacing)
            cumprod = self.alphas_cumprod[kept]
            previous = torch.cat((torch.ones(1, dtype=torch.float64), cumprod[:-1]))
            self._respaced[key] = NoiseSchedule(1. - cumprod / previous, self.timestep_map[kept].tolist())
        return self._respaced[key]

    def tables_on(self, device: Union[str, torch.device]) -> Dict[str, Tensor]:
        """The :attr:`TABLES` by name on ``device``: copied there on the first call for that device, then the same
        tensors (on the CPU, the attributes themselves)."""
        device = torch.device(device)
        tables = self._device_tables.get(device)
        if tables is None:
            tables = self._device_tables[device] = {name: getattr(self, name).to(device) for name in self.TABLES}
        return tables

    def extract(self, name: str, t: Tensor, like: Tensor) -> Tensor:
        """Table ``name`` (one of :attr:`TABLES`) at ``t``, ``(B,)`` in ``like``'s dtype and device, shaped
        ``(B, 1, ...)`` to broadcast over ``like``: the float64 value gathered on ``like``'s device, then cast."""
        values = self.tables_on(like.device)[name][t.to(like.device)].to(like.dtype)
        return values.view(-1, *([1] * (like.dim() - 1)))


__all__ = ['NoiseSchedule', 'linear_betas', 'space_timesteps']
