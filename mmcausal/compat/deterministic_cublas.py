"""``randomness=dict(deterministic=True)`` also sets ``CUBLAS_WORKSPACE_CONFIG``.

Patches: ``set_random_seed`` as ``mmengine.runner.utils``, ``mmengine.runner`` and ``mmengine.runner.runner``
(mmengine 0.10.7) have it.

Why: ``set_random_seed(deterministic=True)`` calls ``torch.use_deterministic_algorithms(True)``, after which the
first CUDA matmul raises unless ``CUBLAS_WORKSPACE_CONFIG`` is set; cuBLAS reads it when its first handle is created,
which is after the Runner sets its randomness. The shim sets it (:data:`CUBLAS_DETERMINISTIC_WORKSPACE`) before
mmengine's call; a value the user set is kept.

When it can go: when mmengine's ``set_random_seed`` sets the cuBLAS workspace itself (not on its ``main`` branch).
"""
import functools
import os
from typing import Optional

from .patching import install, is_shim

#: cuBLAS's deterministic workspace setting (torch's reproducibility notes; ``:16:8`` uses less memory)
CUBLAS_DETERMINISTIC_WORKSPACE = ':4096:8'


def patch_deterministic_cublas() -> None:
    """Make ``randomness=dict(deterministic=True)`` also set ``CUBLAS_WORKSPACE_CONFIG`` (see the module)."""
    from mmengine.runner import utils as runner_utils

    original = runner_utils.set_random_seed
    if is_shim(original):
        return

    @functools.wraps(original)
    def set_random_seed(seed: Optional[int] = None, deterministic: bool = False, diff_rank_seed: bool = False) -> int:
        if deterministic:
            os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', CUBLAS_DETERMINISTIC_WORKSPACE)
        return original(seed, deterministic, diff_rank_seed)

    install('set_random_seed', set_random_seed, 'mmengine.runner.utils', 'mmengine.runner', 'mmengine.runner.runner')
