"""``init_dist`` starts a gloo process group on hosts without an accelerator.

Patches: ``init_dist`` as ``mmengine.dist.utils``, ``mmengine.dist``, ``mmengine.runner.runner`` and
``mmengine._strategy.distributed`` (mmengine 0.10.7) import it.

Why: ``dist/utils.py:130`` (pytorch launcher), ``:164`` (mpi) and ``:221`` (slurm) call
``torch.cuda.set_device(local_rank)`` unconditionally, which raises on CPU-only hosts (``Found no NVIDIA driver`` /
no ``_cuda_setDevice``), and the OpenMMLab runtime bases ask for ``backend='nccl'``, which needs GPUs. On a CPU host
(``mmengine.device.get_device() == 'cpu'``) the shim swaps ``nccl`` for ``gloo`` (warning once) and skips
``set_device``; on an accelerator host it calls mmengine's ``init_dist`` unchanged.

When it can go: when mmengine skips ``set_device`` without CUDA (unchanged on its ``main`` branch).
"""
import contextlib
import functools
import warnings
from typing import Iterator

import torch
from mmengine.device import get_device

from .patching import install, is_shim


@contextlib.contextmanager
def _cuda_set_device_disabled() -> Iterator[None]:
    """Make ``torch.cuda.set_device`` a no-op for the duration of the block."""
    set_device = torch.cuda.set_device
    torch.cuda.set_device = lambda device: None
    try:
        yield
    finally:
        torch.cuda.set_device = set_device


def patch_init_dist_for_cpu() -> None:
    """Let ``init_dist`` start a gloo process group on hosts without an accelerator (see the module)."""
    from mmengine.dist import utils as dist_utils

    init_dist = dist_utils.init_dist
    if is_shim(init_dist):
        return

    @functools.wraps(init_dist)
    def cpu_aware_init_dist(launcher: str, backend: str = 'nccl', init_backend: str = 'torch',
                            **kwargs) -> None:
        if get_device() != 'cpu':
            return init_dist(launcher, backend, init_backend, **kwargs)
        if backend == 'nccl':
            warnings.warn("No GPU available: using the 'gloo' backend instead of the configured "
                          "'nccl' for distributed training on CPU.")
            backend = 'gloo'
        with _cuda_set_device_disabled():
            return init_dist(launcher, backend, init_backend, **kwargs)

    install('init_dist', cpu_aware_init_dist, 'mmengine.dist.utils', 'mmengine.dist',
            'mmengine.runner.runner', 'mmengine._strategy.distributed')
