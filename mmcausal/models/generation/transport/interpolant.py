"""SiT's linear interpolant with velocity prediction (Ma et al. 2024; SiT-LLaMA): the loss, and the ODE and SDE
samplers from noise (``t = 0``) to data (``t = 1``)."""
import importlib
from typing import Dict, Optional

import torch
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.errors import UserInputError
from mmcausal.utils.validation import ConfigValueError, check_choice
from ..diffusion.gaussian_diffusion import ModelFn, StepNoise, mean_flat

SAMPLERS = ('ode', 'sde')
ODE_METHODS = ('euler', 'heun', 'dopri5')
SDE_METHODS = ('euler', 'heun')
DEFAULT_METHODS = dict(ode='dopri5', sde='euler')  # SiT's sample.py defaults of its ODE and SDE modes
DIFFUSION_FORMS = ('sigma', 'constant')
LAST_STEPS = ('mean', None)


class MissingOptionalDependency(UserInputError, ImportError):
    """An optional package a setting needs is not installed (the message names it)."""


@MODELS.register_module()
class LinearInterpolant:
    """``x_t = t x1 + (1 - t) x0`` between noise ``x0 ~ N(0, I)`` (``t = 0``) and data ``x1`` (``t = 1``); the
    network predicts the velocity ``x1 - x0`` (its first ``C`` channels; SiT's extra variance channels are ignored).

    Same interface as :class:`~mmcausal.models.generation.diffusion.GaussianDiffusion`: ``loss(model_fn, x1)`` and
    ``sample(model_fn, noise, sampler='ode' | 'sde', ...)``; ``model_fn(x, t)`` gets ``t`` in ``[0, 1]`` ``(B,)``.
    """

    # ------------------------------------------------------------------ training
    def loss(self, model_fn: ModelFn, x1: Tensor, t: Optional[Tensor] = None,
             noise: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Per-sample ``loss`` ``(B,)``: mean over C, H, W of ``(v_hat - (x1 - x0))^2`` at ``t ~ U[0, 1)``."""
        t = torch.rand(x1.shape[0], device=x1.device) if t is None else t
        x0 = torch.randn_like(x1) if noise is None else noise
        t_b = t.view(-1, *([1] * (x1.dim() - 1))).to(x1.dtype)
        velocity = self.velocity(model_fn, t_b * x1 + (1 - t_b) * x0, t)
        return dict(loss=mean_flat((velocity - (x1 - x0)) ** 2))

    @staticmethod
    def velocity(model_fn: ModelFn, x: Tensor, t: Tensor) -> Tensor:
        """The network's velocity ``(B, C, ...)`` at ``x``, ``t`` ``(B,)``."""
        return model_fn(x, t)[:, :x.shape[1]]

    @staticmethod
    def score(velocity: Tensor, x: Tensor, t: Tensor) -> Tensor:
        """``grad log p_t(x) = (t v - x) / (1 - t)`` (the linear path's score from the velocity; ``t < 1``)."""
        t = t.view(-1, *([1] * (x.dim() - 1))).to(x.dtype)
        return (t * velocity - x) / (1 - t)

    @staticmethod
    def diffusion_coefficient(t: float, form: str = 'sigma', norm: float = 1.) -> float:
        """``w_t`` of the SDE ``dx = (v + w_t score) dt + sqrt(2 w_t) dW``, whose marginals are the interpolant's for
        any ``w_t >= 0``: ``'sigma'`` = ``norm (1 - t)`` (the path's sigma_t, SiT's default) or ``'constant'`` =
        ``norm``."""
        check_choice('diffusion_form', form, DIFFUSION_FORMS)
        return norm * (1. - t if form == 'sigma' else 1.)

    # ------------------------------------------------------------------ sampling
    def sample(self, model_fn: ModelFn, noise: Tensor, sampler: str = 'sde', num_steps: int = 250,
               method: Optional[str] = None, atol: float = 1e-6, rtol: float = 1e-3, diffusion_form: str = 'sigma',
               diffusion_norm: float = 1., last_step: Optional[str] = 'mean', last_step_size: float = 0.04,
               step_noise: Optional[StepNoise] = None) -> Tensor:
        """Samples at ``t = 1`` from ``noise`` at ``t = 0``.

        ``'ode'``: ``dx/dt = v`` on ``linspace(0, 1, num_steps)`` with ``method`` ``'euler'`` / ``'heun'`` (fixed
        steps) or ``'dopri5'`` (adaptive, ``atol`` / ``rtol``; needs ``torchdiffeq``, the paper's Table 9 sampler).
        ``'sde'``: Euler-Maruyama (``method='euler'``) or SiT's stochastic Heun (``'heun'``: the step's noise first,
        then Heun's drift average from the noised point) with the drift ``v + w_t score`` and noise
        ``sqrt(2 w_t dt)`` (``w_t``: :meth:`diffusion_coefficient`). ``last_step='mean'`` (SiT's default): the steps
        on ``linspace(0, 1 - last_step_size, num_steps)``, then one step of ``last_step_size`` with the drift and no
        noise; 250 Euler steps + the mean step = the paper's Table 8 sampler. ``last_step=None``: as SiT's
        ``sample_sde`` (which sets the last step size to 0 for the linear path and velocity model), the steps on
        ``linspace(0, 1, num_steps)`` up to ``t = 1``, the last one with its noise, and no further step
        (``last_step_size`` unused; the Euler method only: Heun's second drift would need the score at ``t = 1``,
        where it diverges). ``method=None`` takes SiT's default of the sampler: ``'dopri5'`` for the ODE,
        ``'euler'`` for the SDE.
        """
        check_choice('transport sampler', sampler, SAMPLERS)
        if num_steps < 2:
            raise ConfigValueError(f'num_steps must be >= 2 (the number of time points), got {num_steps}.')
        if method is None:
            method = DEFAULT_METHODS[sampler]
        if sampler == 'ode':
            check_choice('ODE method', method, ODE_METHODS)
            if method == 'dopri5':
                return self._dopri5(model_fn, noise, num_steps, atol, rtol)
            return self._fixed_step_ode(model_fn, noise, torch.linspace(0., 1., num_steps).tolist(), method)
        check_choice('SDE method', method, SDE_METHODS)
        check_choice('last_step', last_step, LAST_STEPS)
        return self._sde(model_fn, noise, num_steps, method, diffusion_form, diffusion_norm, last_step,
                         last_step_size, step_noise or torch.randn_like)

    def _at(self, model_fn: ModelFn, x: Tensor, t: float) -> Tensor:
        return self.velocity(model_fn, x, torch.full((x.shape[0], ), t, device=x.device, dtype=x.dtype))

    def _fixed_step_ode(self, model_fn: ModelFn, x: Tensor, times: list, method: str) -> Tensor:
        for t, t_next in zip(times[:-1], times[1:]):
            dt = t_next - t
            velocity = self._at(model_fn, x, t)
            if method == 'euler':
                x = x + dt * velocity
            else:
                predicted = x + dt * velocity
                x = x + dt / 2 * (velocity + self._at(model_fn, predicted, t_next))
        return x

    def _dopri5(self, model_fn: ModelFn, x: Tensor, num_steps: int, atol: float, rtol: float) -> Tensor:
        try:
            torchdiffeq = importlib.import_module('torchdiffeq')
        except ImportError as error:
            raise MissingOptionalDependency('The dopri5 ODE sampler needs torchdiffeq (pip install torchdiffeq); '
                                            'or sample with method="heun" / "euler".') from error
        times = torch.linspace(0., 1., num_steps, device=x.device, dtype=x.dtype)
        # the solver's time is a tensor on x's device: repeated per sample there (no float(t), no sync per step)
        return torchdiffeq.odeint(
            lambda t, state: self.velocity(model_fn, state, t.to(state.dtype).reshape(1).repeat(state.shape[0])), x,
            times, method='dopri5', atol=atol, rtol=rtol)[-1]

    def _drift(self, model_fn: ModelFn, x: Tensor, t: float, w: float) -> Tensor:
        velocity = self._at(model_fn, x, t)
        return velocity + w * self.score(velocity, x, torch.full((x.shape[0], ), t, device=x.device))

    def _sde(self, model_fn: ModelFn, x: Tensor, num_steps: int, method: str, form: str, norm: float,
             last_step: Optional[str], last_step_size: float, step_noise: StepNoise) -> Tensor:
        if last_step is None:
            if method == 'heun':
                raise ConfigValueError("The stochastic Heun SDE with last_step=None would evaluate the score at "
                                       "t = 1, where it diverges; use last_step='mean' or method='euler'.")
            last_step_size = 0.  # integrate up to t = 1
        elif not 0. < last_step_size < 1.:
            raise ConfigValueError(f'last_step_size must be in (0, 1) (the score diverges at t = 1), got '
                                   f'{last_step_size}.')
        times = torch.linspace(0., 1. - last_step_size, num_steps).tolist()
        for t, t_next in zip(times[:-1], times[1:]):
            dt = t_next - t
            w = self.diffusion_coefficient(t, form, norm)
            noise = (2 * w * dt) ** 0.5 * step_noise(x)
            if method == 'euler':
                x = x + self._drift(model_fn, x, t, w) * dt + noise
            else:  # SiT's stochastic Heun: noise the point, then average the drifts there and at the Euler guess
                x = x + noise
                drift = self._drift(model_fn, x, t, w)
                w_next = self.diffusion_coefficient(t_next, form, norm)
                x = x + (drift + self._drift(model_fn, x + drift * dt, t_next, w_next)) * dt / 2
        if last_step is None:
            return x
        t = times[-1]
        w = self.diffusion_coefficient(t, form, norm)
        return x + self._drift(model_fn, x, t, w) * last_step_size


__all__ = ['LinearInterpolant', 'MissingOptionalDependency']
