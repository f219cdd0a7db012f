"""Classifier-free guidance (Ho & Salimans 2022) on a prediction's channels, as DiT and SiT apply it."""
from typing import Optional

import torch
from torch import Tensor

from mmcausal.utils.validation import ConfigValueError


def check_cfg_channels(cfg_channels: Optional[int], num_channels: int) -> int:
    """How many leading channels guidance mixes: ``cfg_channels`` (1..``num_channels``), or all when None."""
    if cfg_channels is None:
        return num_channels
    if isinstance(cfg_channels, bool) or not isinstance(cfg_channels, int) or not 1 <= cfg_channels <= num_channels:
        raise ConfigValueError(f'cfg_channels must be None (all {num_channels} predicted channels) or an int in '
                               f'[1, {num_channels}] (3 = the official DiT/SiT rule), got {cfg_channels!r}.')
    return cfg_channels


def classifier_free_guidance(cond: Tensor, uncond: Tensor, scale: float, num_guided: int) -> Tensor:
    """``uncond + scale * (cond - uncond)`` on the first ``num_guided`` channels (dim 1) of ``(B, C, ...)``
    predictions; every later channel keeps the conditional value (DiT: its learned variance, and with the official
    ``num_guided = 3`` also the conditional fourth latent channel)."""
    uncond = uncond[:, :num_guided]
    guided = uncond + scale * (cond[:, :num_guided] - uncond)
    return torch.cat((guided, cond[:, num_guided:]), dim=1)


__all__ = ['check_cfg_channels', 'classifier_free_guidance']
