"""The parameter groups of every ``OptimWrapper``'s optimizer are plain dicts, so ``cfg.compile = True`` can trace
the optimizer step.

Patches: ``OptimWrapper.__init__`` (mmengine 0.10.7).

Why: mmengine's ``DefaultOptimWrapperConstructor`` assigns the list of groups into the optimizer's ``ConfigDict``,
which turns every group into a ``ConfigDict``. ``cfg.compile = True`` compiles ``train_step``, optimizer step
included, and torch 2.14's tracer takes only plain dicts there: the first iteration fails with
``'UserDefinedDictVariable' object has no attribute 'items'``.

When it can go: when mmengine's constructor keeps the groups plain dicts (unchanged on its ``main`` branch), or
torch's tracer takes a ``dict`` subclass there.
"""
import functools
from typing import Any

import torch

from .patching import is_shim, mark_shim


def patch_optimizer_param_groups() -> None:
    """Make the parameter groups of every ``OptimWrapper``'s optimizer plain dicts (see the module)."""
    from mmengine.optim import OptimWrapper

    original = OptimWrapper.__init__
    if is_shim(original):
        return

    @functools.wraps(original)
    def __init__(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
        groups = optimizer.param_groups
        groups[:] = [dict(group) for group in groups]
        original(self, optimizer, *args, **kwargs)

    OptimWrapper.__init__ = mark_shim(__init__)
