"""``FSDPStrategy`` shards a model on a host without an accelerator, with the CPU as FSDP's device.

Patches: ``MMFullyShardedDataParallel.__init__`` (mmengine 0.10.7).

Why: ``FSDPStrategy._wrap_model`` (``_strategy/fsdp.py:154-157``) always passes ``device_id=int(LOCAL_RANK)``, which
torch turns into an accelerator device, and without a ``device_id`` torch >= 2.4 refuses a CPU module ("FSDP needs a
non-CPU accelerator device, but no accelerator device is detected", ``fsdp/_init_utils.py``). An explicit
``device_id=torch.device('cpu')`` is supported: FSDP then shards, all-gathers and reduce-scatters on CPU over gloo
(how the sharded-training test runs). On a CPU host the shim replaces an integer ``device_id`` by the CPU.

When it can go: when mmengine passes the strategy's device to FSDP (unchanged on its ``main`` branch).
"""
import functools

import torch
from mmengine.device import get_device
from mmengine.model import MMFullyShardedDataParallel

from .patching import is_shim, mark_shim


def patch_fsdp_for_cpu() -> None:
    """Give FSDP the CPU as its device when ``FSDPStrategy`` shards a model on a host without an accelerator."""
    init = MMFullyShardedDataParallel.__init__
    if is_shim(init):
        return

    @functools.wraps(init)
    def __init__(self, module: torch.nn.Module, *args, **kwargs) -> None:
        if get_device() == 'cpu' and isinstance(kwargs.get('device_id'), int):
            kwargs['device_id'] = torch.device('cpu')
        init(self, module, *args, **kwargs)

    MMFullyShardedDataParallel.__init__ = mark_shim(__init__)
