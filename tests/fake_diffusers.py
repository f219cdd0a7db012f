"""A stand-in for diffusers (which the tests never import): ``AutoencoderKL`` with the surface SDVAE uses."""
import sys
import types

import torch
from torch import nn


class FakeAutoencoderKL(nn.Module):
    """``from_pretrained(path, **kwargs)`` (recorded in ``loaded_from``), ``encode(x).latent_dist.parameters``
    (``mean | logvar``, f = 8: the mean is the 8x8 average of the 3 channels and of their mean, logvar -2) and
    ``decode(z).sample`` (the first 3 channels up-sampled 8x)."""
    loaded_from = []

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(()))

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        cls.loaded_from.append((path, kwargs))
        return cls()

    @staticmethod
    def posterior_mean(x: torch.Tensor) -> torch.Tensor:
        pooled = nn.functional.avg_pool2d(x, 8)
        return torch.cat((pooled, pooled.mean(1, keepdim=True)), 1)

    def encode(self, x):
        mean = self.posterior_mean(x) * self.weight
        return types.SimpleNamespace(latent_dist=types.SimpleNamespace(parameters=torch.cat((mean, mean * 0 - 2), 1)))

    def decode(self, z):
        return types.SimpleNamespace(sample=nn.functional.interpolate(z[:, :3], scale_factor=8.))


def install(monkeypatch) -> None:
    """Make ``import diffusers`` give the stand-in for the rest of the test."""
    FakeAutoencoderKL.loaded_from.clear()
    monkeypatch.setitem(sys.modules, 'diffusers', types.SimpleNamespace(AutoencoderKL=FakeAutoencoderKL))
