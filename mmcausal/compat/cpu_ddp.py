"""``MMDistributedDataParallel`` wraps a CPU module without ``device_ids``.

Patches: ``MMDistributedDataParallel.__init__`` (mmengine 0.10.7).

Why: ``Runner.wrap_model`` (``runner.py:898-911``) always passes ``device_ids=[LOCAL_RANK]``; torch's
``DistributedDataParallel`` raises ``ValueError`` ("device_ids and output_device arguments only work with
single-device/multiple-device GPU modules") for a CPU module. The shim drops ``device_ids`` and ``output_device``
when every parameter of the module is on the CPU.

When it can go: when mmengine passes ``device_ids`` only for accelerator modules (unchanged on its ``main`` branch).
"""
import functools

import torch
from mmengine.model import MMDistributedDataParallel

from .patching import is_shim, mark_shim


def patch_ddp_for_cpu() -> None:
    """Drop ``device_ids``/``output_device`` when ``MMDistributedDataParallel`` wraps a CPU module."""
    init = MMDistributedDataParallel.__init__
    if is_shim(init):
        return

    @functools.wraps(init)
    def __init__(self, module: torch.nn.Module, *args, **kwargs) -> None:
        if {param.device.type for param in module.parameters()} == {'cpu'}:
            kwargs.pop('device_ids', None)
            kwargs.pop('output_device', None)
        init(self, module, *args, **kwargs)

    MMDistributedDataParallel.__init__ = mark_shim(__init__)
