"""The optimizer state of an ``FSDPStrategy`` run is saved and loaded so that the run resumes, wrapper state included.

Patches: ``FSDPStrategy.optim_state_dict`` and ``FSDPStrategy.load_optim_state_dict`` (mmengine 0.10.7
``_strategy/fsdp.py:345`` and ``:410``).

Why: ``load_optim_state_dict`` calls ``FSDP.optim_state_dict_to_load(state_dict, model, optimizer)``, the torch 2.0
order; torch >= 2.1 takes ``(model, optim, optim_state_dict)``, so every resume of an ``FSDPStrategy`` run fails with
``TypeError: unhashable type: 'dict'``. And ``optim_state_dict`` hands FSDP the optimizer *wrapper*, whose state FSDP
rebuilds from the optimizer's alone: the wrapper's own entries are lost (``AmpOptimWrapper``'s loss scale, so a
resumed AMP run starts again from the initial scale; ``base_param_settings``, so it logs a wrong ``base_lr``). The
shim passes the arguments by name, gives FSDP the optimizer and keeps the wrapper's entries next to FSDP's state,
where ``OptimWrapper.load_state_dict`` expects them.

When it can go: when mmengine does both (unchanged on its ``main`` branch).
"""
import functools

from .patching import is_shim, mark_shim

#: what an optimizer's own ``state_dict`` holds; an optimizer wrapper adds its entries next to them
_OPTIMIZER_KEYS = ('state', 'param_groups')


def patch_fsdp_optimizer_state() -> None:
    """Save and load the optimizer state of an ``FSDPStrategy`` run with the wrapper's state (see the module)."""
    from mmengine._strategy import FSDPStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel

    if is_shim(FSDPStrategy.load_optim_state_dict):
        return

    @functools.wraps(FSDPStrategy.optim_state_dict)
    def optim_state_dict(self) -> dict:
        wrapper_entries = {key: value for key, value in self.optim_wrapper.state_dict().items()
                           if key not in _OPTIMIZER_KEYS}
        return {**FullyShardedDataParallel.optim_state_dict(self.model, self.optim_wrapper.optimizer),
                **wrapper_entries}

    @functools.wraps(FSDPStrategy.load_optim_state_dict)
    def load_optim_state_dict(self, state_dict: dict) -> None:
        optimizer_state = {key: state_dict[key] for key in _OPTIMIZER_KEYS}
        wrapper_entries = {key: value for key, value in state_dict.items() if key not in _OPTIMIZER_KEYS}
        optimizer_state = FullyShardedDataParallel.optim_state_dict_to_load(
            model=self.model, optim=self.optim_wrapper.optimizer, optim_state_dict=optimizer_state)
        self.optim_wrapper.load_state_dict({**optimizer_state, **wrapper_entries})

    for method in (optim_state_dict, load_optim_state_dict):
        setattr(FSDPStrategy, method.__name__, mark_shim(method))
