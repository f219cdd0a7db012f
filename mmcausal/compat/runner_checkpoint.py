"""The checkpoint a Runner loads reaches its hooks as a dict with the weights under ``'state_dict'``.

Patches: ``_load_checkpoint`` as ``mmengine.runner.runner`` (mmengine 0.10.7) imports it, which
``Runner.load_checkpoint`` calls (``tools/test.py``, ``load_from``). Only the Runner's reference is patched:
``CheckpointLoader`` and ``load_checkpoint`` return files as they are.

Why: ``Runner.load_checkpoint`` hands the loaded object to the hooks' ``after_load_checkpoint`` as it is;
mmpretrain's ``EMAHook`` then reads ``checkpoint['state_dict']``, a ``KeyError`` traceback for a bare state dict
(``torch.save(model.state_dict())``, which the model itself loads), and a file holding a tensor or a list fails deep
in mmengine. The shim wraps a bare state dict and refuses anything but a dict in one line.

When it can go: when mmengine's ``Runner.load_checkpoint`` wraps a bare state dict for its hooks and refuses a file
that is not a dict.
"""
import functools
import os
from typing import Any, Optional

import torch

from mmcausal.utils.checkpoint_loading import CheckpointFormatError
from .patching import install, is_shim


def _as_runner_checkpoint(loaded: Any, source: Any) -> dict:
    """What a Runner's hooks expect of the checkpoint it loads: a dict, with the weights under ``'state_dict'``.

    A bare state dict (tensors only, as ``torch.save(model.state_dict())`` writes) is wrapped, so that hooks that
    read ``checkpoint['state_dict']`` (mmpretrain's ``EMAHook``) see it; anything but a dict is refused in one line.
    """
    if not isinstance(loaded, dict):
        name = repr(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else 'the checkpoint'
        raise CheckpointFormatError(f'{name} holds a {type(loaded).__name__}, not a dict of weights (a Runner '
                                    'checkpoint or torch.save(model.state_dict())); check the path.')
    if loaded and 'state_dict' not in loaded and all(isinstance(value, torch.Tensor) for value in loaded.values()):
        return {'state_dict': loaded}
    return loaded


def patch_runner_checkpoint_form() -> None:
    """Make ``Runner.load_checkpoint`` hand its hooks a dict with ``'state_dict'`` (see the module)."""
    from mmengine.runner import runner as runner_module

    load = runner_module._load_checkpoint
    if is_shim(load):
        return

    @functools.wraps(load)
    def load_runner_checkpoint(filename: str, map_location: Optional[Any] = None, logger: Any = None) -> dict:
        return _as_runner_checkpoint(load(filename, map_location=map_location, logger=logger), filename)

    install('_load_checkpoint', load_runner_checkpoint, 'mmengine.runner.runner')
