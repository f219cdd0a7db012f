"""DDPM as DiT trains and samples it (IDDPM / ADM, Nichol & Dhariwal 2021): the epsilon-prediction objective with
the learned-range variance and its hybrid loss, and the DDPM and DDIM samplers over respaced steps."""
import math
from typing import Callable, Dict, Optional, Tuple

import torch
from torch import Tensor

from mmcausal.registry import MODELS
from mmcausal.utils.validation import ConfigValueError, check_choice
from .likelihood import discretized_gaussian_log_likelihood, normal_kl
from .schedule import NoiseSchedule, Spacing, linear_betas

ModelFn = Callable[[Tensor, Tensor], Tensor]  # (x_t (B, C, ...), t (B,)) -> prediction (B, C or 2C, ...)
StepNoise = Callable[[Tensor], Tensor]  # like torch.randn_like: fresh N(0, I) noise of a tensor's shape
FIXED_VARIANCES = ('large', 'small')
SAMPLERS = ('ddpm', 'ddim')


def mean_flat(x: Tensor) -> Tensor:
    """Mean over every dim but the batch: ``(B, ...) -> (B,)``."""
    return x.mean(dim=tuple(range(1, x.dim())))


@MODELS.register_module()
class GaussianDiffusion:
    """The DDPM objective and samplers of DiT / DiT-LLaMA (the objective of a class-conditional generative model).

    The network predicts ``eps`` (``C`` channels) and, with ``learn_sigma``, a value ``v`` (``C`` more) that sets the
    reverse variance ``log s2 = f log(beta_t) + (1 - f) log(beta~_t)``, ``f = (v + 1) / 2``; without it the variance
    is fixed (``fixed_variance``: ``'large'`` = beta_t, ``'small'`` = beta~_t).

    Args:
        num_timesteps: T (1000).
        learn_sigma: the network's second half of channels is ``v``; the loss is L_simple + L_vb ("hybrid").
        fixed_variance: the reverse variance without ``learn_sigma``.
        beta_start, beta_end: the linear schedule's betas at T = 1000.

    Interface shared with :class:`~mmcausal.models.generation.transport.LinearInterpolant` (what a generative model
    calls): ``loss(model_fn, x0)`` -> per-sample loss terms ``(B,)`` with a ``'loss'`` entry, and
    ``sample(model_fn, noise, sampler=..., num_steps=...)`` -> samples; ``model_fn(x, t)`` is the network with its
    labels (and guidance) bound, ``t`` the original integer steps.
    """

    def __init__(self, num_timesteps: int = 1000, learn_sigma: bool = True, fixed_variance: str = 'large',
                 beta_start: float = 1e-4, beta_end: float = 0.02) -> None:
        if num_timesteps < 2:
            raise ConfigValueError(f'num_timesteps must be >= 2, got {num_timesteps}.')
        self.schedule = NoiseSchedule(linear_betas(num_timesteps, beta_start, beta_end))
        self.num_timesteps = num_timesteps
        self.learn_sigma = learn_sigma
        self.fixed_variance = check_choice('fixed_variance', fixed_variance, FIXED_VARIANCES)

    # ------------------------------------------------------------------ forward process
    def q_sample(self, x0: Tensor, t: Tensor, noise: Tensor) -> Tensor:
        """``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise``."""
        s = self.schedule
        return s.extract('sqrt_alphas_cumprod', t, x0) * x0 + s.extract('sqrt_one_minus_alphas_cumprod', t, x0) * noise

    @staticmethod
    def q_posterior(schedule: NoiseSchedule, x0: Tensor, x_t: Tensor, t: Tensor) -> Tuple[Tensor, Tensor]:
        """Mean and clipped log variance of ``q(x_{t-1} | x_t, x0)``."""
        mean = schedule.extract('posterior_mean_coef1', t, x_t) * x0 + \
            schedule.extract('posterior_mean_coef2', t, x_t) * x_t
        return mean, schedule.extract('posterior_log_variance_clipped', t, x_t)

    def p_mean_variance(self, schedule: NoiseSchedule, out: Tensor, x_t: Tensor, t: Tensor) -> Dict[str, Tensor]:
        """The reverse step's ``mean``, ``log_variance`` and ``pred_xstart`` (x0 from eps, not clipped) from the
        network output ``out`` at step ``t`` of ``schedule``."""
        eps, log_variance = self._eps_and_log_variance(schedule, out, x_t, t)
        x0 = schedule.extract('sqrt_recip_alphas_cumprod', t, x_t) * x_t - \
            schedule.extract('sqrt_recipm1_alphas_cumprod', t, x_t) * eps
        mean, _ = self.q_posterior(schedule, x0, x_t, t)
        return dict(mean=mean, log_variance=log_variance, pred_xstart=x0, eps=eps)

    def _eps_and_log_variance(self, schedule: NoiseSchedule, out: Tensor, x_t: Tensor,
                              t: Tensor) -> Tuple[Tensor, Tensor]:
        channels = x_t.shape[1]
        expected = 2 * channels if self.learn_sigma else channels
        if out.shape[1] < expected:
            raise ConfigValueError(f'The network predicts {out.shape[1]} channels for {channels}-channel samples; '
                                   f'GaussianDiffusion(learn_sigma={self.learn_sigma}) needs {expected}.')
        eps = out[:, :channels]
        if self.learn_sigma:
            fraction = (out[:, channels:2 * channels] + 1.) / 2.
            min_log = schedule.extract('posterior_log_variance_clipped', t, x_t)
            max_log = schedule.extract('log_betas', t, x_t)
            return eps, fraction * max_log + (1. - fraction) * min_log
        if self.fixed_variance == 'large':
            return eps, schedule.extract('large_log_variance', t, x_t).expand_as(x_t)
        return eps, schedule.extract('posterior_log_variance_clipped', t, x_t).expand_as(x_t)

    # ------------------------------------------------------------------ training
    def loss(self, model_fn: ModelFn, x0: Tensor, t: Optional[Tensor] = None,
             noise: Optional[Tensor] = None) -> Dict[str, Tensor]:
        """Per-sample losses ``(B,)``: ``mse`` (L_simple, mean over C, H, W of ``(eps - eps_hat)^2``) and, with
        ``learn_sigma``, ``vb`` (the variational bound term in bits per dim, through the variance value only: eps_hat
        is detached there) and ``loss = mse + vb``. ``t`` ~ U{0..T-1} and ``noise`` ~ N(0, I) unless given."""
        if t is None:
            t = torch.randint(0, self.num_timesteps, (x0.shape[0], ), device=x0.device)
        noise = torch.randn_like(x0) if noise is None else noise
        x_t = self.q_sample(x0, t, noise)
        out = model_fn(x_t, t)
        channels = x0.shape[1]
        terms = dict(mse=mean_flat((noise - out[:, :channels]) ** 2))
        if not self.learn_sigma:
            terms['loss'] = terms['mse']
            return terms
        frozen = torch.cat((out[:, :channels].detach(), out[:, channels:2 * channels]), dim=1)
        terms['vb'] = self.vb_terms_bpd(self.schedule, frozen, x0, x_t, t)
        terms['loss'] = terms['mse'] + terms['vb']
        return terms

    def vb_terms_bpd(self, schedule: NoiseSchedule, out: Tensor, x0: Tensor, x_t: Tensor, t: Tensor) -> Tensor:
        """One term of the variational bound in bits per dim ``(B,)``: ``KL(q(x_{t-1}|x_t, x0) || p(x_{t-1}|x_t))``
        for ``t > 0``, the discretised-Gaussian decoder NLL of ``x0`` at ``t = 0``."""
        true_mean, true_log_variance = self.q_posterior(schedule, x0, x_t, t)
        pred = self.p_mean_variance(schedule, out, x_t, t)
        kl = mean_flat(normal_kl(true_mean, true_log_variance, pred['mean'], pred['log_variance'])) / math.log(2.)
        nll = -mean_flat(discretized_gaussian_log_likelihood(x0, pred['mean'], 0.5 * pred['log_variance']))
        return torch.where(t == 0, nll / math.log(2.), kl)

    # ------------------------------------------------------------------ sampling
    def sample(self, model_fn: ModelFn, noise: Tensor, sampler: str = 'ddpm', num_steps: Spacing = 250,
               eta: float = 0., step_noise: Optional[StepNoise] = None) -> Tensor:
        """Samples from ``noise`` ``x_T`` ``(B, C, ...)`` over the steps ``num_steps`` keeps (see
        :func:`~mmcausal.models.generation.diffusion.schedule.space_timesteps`; 250 = DiT's sampler).

        ``'ddpm'``: ancestral sampling with the (learned or fixed) variance, no noise in the last step; ``'ddim'``:
        DDIM with ``eta`` (0 = deterministic; the variance value is ignored). ``step_noise`` draws each step's noise
        (default ``torch.randn_like``; a per-sample seeded draw keeps samples independent of the batch split).
        """
        check_choice('diffusion sampler', sampler, SAMPLERS)
        schedule = self.schedule.respaced(num_steps)
        step_noise = step_noise or torch.randn_like
        x = noise
        timestep_map = schedule.tables_on(x.device)['timestep_map']
        for index in reversed(range(schedule.num_timesteps)):
            t = torch.full((x.shape[0], ), index, device=x.device, dtype=torch.long)
            out = model_fn(x, timestep_map[t])
            x = self._ddpm_step(schedule, out, x, t, index == 0, step_noise) if sampler == 'ddpm' else \
                self._ddim_step(schedule, out, x, t, index == 0, eta, step_noise)
        return x

    def _ddpm_step(self, schedule: NoiseSchedule, out: Tensor, x: Tensor, t: Tensor, last: bool,
                   step_noise: StepNoise) -> Tensor:
        pred = self.p_mean_variance(schedule, out, x, t)
        if last:
            return pred['mean']
        return pred['mean'] + torch.exp(0.5 * pred['log_variance']) * step_noise(x)

    def _ddim_step(self, schedule: NoiseSchedule, out: Tensor, x: Tensor, t: Tensor, last: bool, eta: float,
                   step_noise: StepNoise) -> Tensor:
        x0 = self.p_mean_variance(schedule, out, x, t)['pred_xstart']
        eps = (schedule.extract('sqrt_recip_alphas_cumprod', t, x) * x - x0) / \
            schedule.extract('sqrt_recipm1_alphas_cumprod', t, x)
        alpha_bar = schedule.extract('alphas_cumprod', t, x)
        alpha_bar_prev = schedule.extract('alphas_cumprod_prev', t, x)
        sigma = eta * ((1 - alpha_bar_prev) / (1 - alpha_bar)).sqrt() * (1 - alpha_bar / alpha_bar_prev).sqrt()
        mean = x0 * alpha_bar_prev.sqrt() + (1 - alpha_bar_prev - sigma ** 2).sqrt() * eps
        if last or eta == 0:
            return mean
        return mean + sigma * step_noise(x)


__all__ = ['GaussianDiffusion', 'mean_flat']
