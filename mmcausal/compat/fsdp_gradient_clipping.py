"""Under ``FSDPStrategy`` gradients are clipped by the norm of the whole model, not of each rank's shard.

Patches: ``FSDPStrategy.build_optim_wrapper`` (mmengine 0.10.7; unchanged on its ``main`` branch): the optimizer
wrappers it builds clip through the root FSDP module's ``clip_grad_norm_``.

Why: ``OptimWrapper`` clips with ``torch.nn.utils.clip_grad_norm_`` over the optimizer's parameters
(``optim/optimizer/optimizer_wrapper.py:285-298``), which under FSDP are the rank's shards: every rank computes the
norm of its own shard and scales its part of the gradient by its own factor (the logged ``grad_norm`` differs between
ranks). FSDP's ``clip_grad_norm_`` reduces the norm over all ranks; value clipping is element-wise and stays as it
is.

When it can go: when mmengine clips FSDP models through FSDP.
"""
import functools
from typing import Any, Optional

import torch

from .patching import is_shim, mark_shim


def _clip_sharded_grad_norm(model: torch.nn.Module, params: Any, max_norm: float, norm_type: float = 2.,
                            **unsupported: Any) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for the FSDP root ``model``, whose gradient shards ``params`` are. It is
    a collective: every rank must call it (mmengine skips clipping on a rank without gradients; with a real model
    every rank has them). ``clip_grad`` options FSDP's norm does not take are refused by name."""
    if unsupported:
        raise TypeError(f'clip_grad options {sorted(unsupported)} are not supported under FSDPStrategy '
                        '(FSDP clips with max_norm and norm_type only).')
    return model.clip_grad_norm_(max_norm, norm_type)


def patch_fsdp_gradient_clipping() -> None:
    """Clip gradients by the norm of the whole model under ``FSDPStrategy`` (see the module)."""
    from mmengine._strategy import FSDPStrategy
    from mmengine.optim import OptimWrapperDict

    build = FSDPStrategy.build_optim_wrapper
    if is_shim(build):
        return

    @functools.wraps(build)
    def build_optim_wrapper(self, optim_wrapper: Any, model: Optional[torch.nn.Module] = None) -> Any:
        built = build(self, optim_wrapper, model)
        for wrapper in built.values() if isinstance(built, OptimWrapperDict) else [built]:
            if getattr(wrapper, 'clip_func', None) is torch.nn.utils.clip_grad_norm_:
                wrapper.clip_func = functools.partial(_clip_sharded_grad_norm, model)
        return built

    FSDPStrategy.build_optim_wrapper = mark_shim(build_optim_wrapper)
