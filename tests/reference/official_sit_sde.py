"""An independent re-statement of SiT's SDE sampler for the linear path with a velocity model (SiT and SiT-LLaMA), used
only as a test oracle.

Written from the official SiT code's ``transport`` package (``transport.py``, ``integrators.py``; not from
mmcausal): ``Sampler.sample_sde`` sets the last step size to 0 when ``last_step`` is None; ``check_interval`` then
integrates on ``[0, 1 - last_step_size]`` (the linear path with a velocity model has ``sample_eps = 0``, and
``t0 = 0`` for the ``sigma`` diffusion), so with no last step the grid ends at ``t = 1``. ``integrators.sde`` takes
Euler-Maruyama steps at ``t[:-1]`` of ``linspace(t0, t1, num_steps)`` with the constant ``dt = t[1] - t[0]``, each
drawing its noise first: ``x <- x + drift(x, t) dt + sqrt(2 w_t) sqrt(dt) z``. The last step at ``t1``: None keeps
``x``; ``'Mean'`` adds ``drift(x, t1) * last_step_size`` without noise. ``num_steps - 1`` (+ 1 with ``'Mean'``)
network evaluations.

Path ``x_t = t x1 + (1 - t) x0`` (``t = 1`` is data); score from the velocity ``(t v - x) / (1 - t)``; diffusion
``w_t = norm (1 - t)`` (``'sigma'``); drift ``v + w_t score``.
"""
from typing import Callable, Optional

import torch
from torch import Tensor


def sde_sample(velocity: Callable[[Tensor, Tensor], Tensor], x: Tensor, num_steps: int = 250,
               last_step: Optional[str] = 'Mean', last_step_size: float = 0.04, diffusion_norm: float = 1.,
               noise: Callable[[Tensor], Tensor] = torch.randn_like) -> Tensor:
    """The official Euler-Maruyama SDE sample at its end time from ``x`` ``(B, ...)`` at ``t = 0``.

    ``velocity(x, t)`` gets ``t`` ``(B,)``; ``noise(x)`` gives each step's ``N(0, I)`` draw shaped like ``x``.
    """
    if last_step is None:
        last_step_size = 0.
    t1 = 1. - last_step_size
    times = torch.linspace(0., t1, num_steps, dtype=torch.float64)
    dt = (times[1] - times[0]).item()

    def drift(state: Tensor, t: float) -> Tensor:
        v = velocity(state, torch.full((state.shape[0], ), t, dtype=state.dtype))
        score = (t * v - state) / (1. - t)
        return v + diffusion_norm * (1. - t) * score

    for t in times[:-1].tolist():
        z = noise(x)
        x = x + drift(x, t) * dt + (2. * diffusion_norm * (1. - t)) ** 0.5 * dt ** 0.5 * z
    if last_step == 'Mean':
        x = x + drift(x, t1) * last_step_size
    elif last_step is not None:
        raise NotImplementedError(f'last step {last_step!r} is not restated here')
    return x
