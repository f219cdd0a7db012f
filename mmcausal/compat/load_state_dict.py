"""A checkpoint that leaves most of the receiving module's weights unloaded is refused, not loaded with a warning.

Patches: ``load_state_dict`` in ``mmengine.runner.checkpoint`` and ``mmengine.runner`` (mmengine 0.10.7
``runner/checkpoint.py:58-139``), which ``load_from``, ``Runner.load_checkpoint`` (``tools/test.py``) and
``Pretrained`` inits go through.

Why: it loads with ``strict=False`` and only logs a warning for missing keys and shape mismatches, so a wrong
checkpoint silently gives a randomly initialised model. After mmengine's own load, the keys it collected (through a
load pre-hook on the receiving module, which torch hands its lists) go to
:func:`mmcausal.utils.checkpoint_coverage.check_checkpoint_coverage`, which raises ``CheckpointMismatchError``
unless the load runs inside ``partial_loads_allowed()``.

When it can go: not with an upgrade. mmengine's lenient load is a choice (unchanged on its ``main`` branch), not a
bug; delete only if mmengine itself refuses a checkpoint that loads less than half of a module.
"""
import functools
from typing import Any

import torch

from mmcausal.utils.checkpoint_coverage import CheckpointMismatchError, check_checkpoint_coverage, size_mismatched_keys
from mmcausal.utils.errors import UserInputError
from .patching import install, is_shim


def _receiving_module(module: torch.nn.Module) -> torch.nn.Module:
    """The module mmengine's ``load_state_dict`` loads into: ``module`` without its wrappers (DDP, TTA)."""
    from mmengine.model import BaseTTAModel, is_model_wrapper
    while is_model_wrapper(module) or isinstance(module, BaseTTAModel):
        module = module.module
    return module


def _check_coverage_by_name(receiver: torch.nn.Module, state_dict: dict) -> None:
    """Where a load hook refused an entry before the load, judge the checkpoint by its keys and shapes alone: a
    checkpoint of another model is named as such (``CheckpointMismatchError``), not by the entry the hook refused."""
    own = receiver.state_dict()
    missing = [key for key in own if key not in state_dict]
    mismatched = [key for key in own if key in state_dict and hasattr(state_dict[key], 'shape')
                  and state_dict[key].shape != own[key].shape]
    try:
        check_checkpoint_coverage(receiver, list(state_dict), missing, mismatched)
    except CheckpointMismatchError as mismatch:  # the cause, which the hook's refusal would hide (the CLI reports
        raise mismatch from None                  # the innermost user error of a chain)


def patch_checkpoint_coverage() -> None:
    """Refuse a checkpoint that leaves most of the receiving module's weights unloaded (see the module)."""
    from mmengine.runner import checkpoint as checkpoint_module

    load_state_dict = checkpoint_module.load_state_dict
    if is_shim(load_state_dict):
        return

    @functools.wraps(load_state_dict)
    def checked_load_state_dict(module: torch.nn.Module, state_dict: dict, strict: bool = False,
                                logger: Any = None) -> None:
        receiver = _receiving_module(module)
        collected = {}

        def keep_lists(_module, _state_dict, _prefix, _metadata, _strict, missing, _unexpected, errors) -> None:
            collected.update(missing=missing, errors=errors)

        handle = receiver.register_load_state_dict_pre_hook(keep_lists)
        try:
            load_state_dict(module, state_dict, strict, logger)
        except UserInputError:  # a load hook refused an entry (a pos_embed it cannot resize) ...
            _check_coverage_by_name(receiver, state_dict)  # ... of another model's checkpoint?
            raise
        finally:
            handle.remove()
        check_checkpoint_coverage(receiver, list(state_dict), collected.get('missing', []),
                                  size_mismatched_keys(collected.get('errors', [])))

    install('load_state_dict', checked_load_state_dict, 'mmengine.runner.checkpoint', 'mmengine.runner')
