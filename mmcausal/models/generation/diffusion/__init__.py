"""DDPM (DiT, DiT-LLaMA): noise schedule and respacing, the hybrid loss, DDPM and DDIM samplers."""
from .gaussian_diffusion import GaussianDiffusion, mean_flat
from .likelihood import approx_standard_normal_cdf, discretized_gaussian_log_likelihood, normal_kl
from .schedule import NoiseSchedule, linear_betas, space_timesteps

__all__ = ['GaussianDiffusion', 'NoiseSchedule', 'approx_standard_normal_cdf', 'discretized_gaussian_log_likelihood',
           'linear_betas', 'mean_flat', 'normal_kl', 'space_timesteps']
