"""Gaussian KL divergence and the discretised Gaussian likelihood of DDPM's variational bound (in nats,
elementwise)."""
import math

import torch
from torch import Tensor


def normal_kl(mean1: Tensor, logvar1: Tensor, mean2: Tensor, logvar2: Tensor) -> Tensor:
    """``KL(N(mean1, exp(logvar1)) || N(mean2, exp(logvar2)))`` elementwise (broadcasting)."""
    return 0.5 * (-1. + logvar2 - logvar1 + torch.exp(logvar1 - logvar2)
                  + (mean1 - mean2) ** 2 * torch.exp(-logvar2))


def approx_standard_normal_cdf(x: Tensor) -> Tensor:
    """The tanh approximation of the standard normal CDF that DDPM's decoder term uses."""
    return 0.5 * (1. + torch.tanh(math.sqrt(2. / math.pi) * (x + 0.044715 * x ** 3)))


def discretized_gaussian_log_likelihood(x: Tensor, means: Tensor, log_scales: Tensor) -> Tensor:
    """``log P(x)`` of data on 256 bins of ``[-1, 1]`` (width ``2/255``) under ``N(means, exp(log_scales)^2)``, the
    outermost bins open-ended; elementwise."""
    centered = x - means
    inv_stdv = torch.exp(-log_scales)
    cdf_plus = approx_standard_normal_cdf(inv_stdv * (centered + 1. / 255.))
    cdf_min = approx_standard_normal_cdf(inv_stdv * (centered - 1. / 255.))
    log_cdf_plus = cdf_plus.clamp(min=1e-12).log()
    log_one_minus_cdf_min = (1. - cdf_min).clamp(min=1e-12).log()
    log_cdf_delta = (cdf_plus - cdf_min).clamp(min=1e-12).log()
    return torch.where(x < -0.999, log_cdf_plus, torch.where(x > 0.999, log_one_minus_cdf_min, log_cdf_delta))


__all__ = ['approx_standard_normal_cdf', 'discretized_gaussian_log_likelihood', 'normal_kl']
