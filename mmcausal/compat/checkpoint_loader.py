"""Every scheme of mmengine's ``CheckpointLoader`` loads through mmcausal's weights-only loader.

Patches: in ``mmengine.runner.checkpoint`` (mmengine 0.10.7) only, the module's ``torch`` (its ``load`` becomes
:func:`mmcausal.utils.checkpoint_loading.load_checkpoint_file`) and ``load_url``, and registers the scheme
``file://`` with ``CheckpointLoader``. Code outside that module is untouched.

Why: mmengine 0.10.7 calls ``torch.load`` without ``weights_only`` (``runner/checkpoint.py``: local files,
``open-mmlab://`` files, ``pavi://``, ``s3://``), and ``http(s)://`` (also ``torchvision://``, ``open-mmlab://``,
``mmcls://``, which resolve to URLs) goes through ``torch.hub.load_state_dict_from_url``, which passes
``weights_only=False`` and so unpickles anything. Under torch >= 2.6 the first fail on Runner checkpoints
(``HistoryBuffer``), the second runs any payload; a ``file://`` URL would reach ``torch.load`` as a path.

When it can go: not with a plain mmengine upgrade. mmengine's ``main`` branch mends the failure by passing
``weights_only=False`` everywhere, which is unsafe; delete only when mmengine loads every scheme weights-only (with
an allow-list for its own classes such as ``HistoryBuffer``) and knows ``file://``.
"""
import os
import os.path as osp
import sys
import types
import urllib.parse
import urllib.request
from typing import Any, Optional

import torch
from mmengine.runner import CheckpointLoader

from mmcausal.utils.checkpoint_loading import load_checkpoint_file


class _TorchWithSafeLoad(types.ModuleType):
    """``torch`` as ``mmengine.runner.checkpoint`` sees it: the same module, but ``load`` is mmcausal's."""

    def __init__(self) -> None:
        super().__init__('torch', 'torch, with load() = mmcausal.utils.load_checkpoint_file')

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def load(f: Any, map_location: Optional[Any] = None, **kwargs: Any) -> Any:
        """``torch.load`` for mmengine: weights-only with mmcausal's allow-list, whatever is asked."""
        return load_checkpoint_file(f, map_location)


def _load_url(url: str, model_dir: Optional[str] = None, map_location: Optional[Any] = None,
              progress: bool = True, check_hash: bool = False, file_name: Optional[str] = None) -> Any:
    """``load_url`` for mmengine: download into torch's hub cache as torch does, then load safely."""
    model_dir = model_dir or osp.join(torch.hub.get_dir(), 'checkpoints')
    os.makedirs(model_dir, exist_ok=True)
    cached = osp.join(model_dir, file_name or osp.basename(urllib.parse.urlparse(url).path))
    if not osp.exists(cached):
        sys.stderr.write(f'Downloading: "{url}" to {cached}\n')
        match = torch.hub.HASH_REGEX.search(osp.basename(cached)) if check_hash else None
        torch.hub.download_url_to_file(url, cached, match.group(1) if match else None, progress=progress)
    return load_checkpoint_file(cached, map_location, name=url)


def _load_from_file_url(filename: str, map_location: Optional[Any] = None) -> Any:
    """``file://`` URLs (mmengine has no such scheme; they would reach ``torch.load`` as a path)."""
    path = urllib.request.url2pathname(urllib.parse.urlparse(filename).path)
    return load_checkpoint_file(path, map_location, name=filename)


def patch_checkpoint_loading() -> None:
    """Make every scheme of mmengine's ``CheckpointLoader`` load through :func:`load_checkpoint_file`: inside
    ``mmengine.runner.checkpoint`` ``torch.load`` is the safe loader, ``load_url`` downloads and then loads safely,
    and ``file://`` becomes a scheme."""
    from mmengine.runner import checkpoint as checkpoint_module

    if isinstance(checkpoint_module.torch, _TorchWithSafeLoad):
        return
    checkpoint_module.torch = _TorchWithSafeLoad()
    checkpoint_module.load_url = _load_url
    CheckpointLoader.register_scheme(prefixes='file://', loader=_load_from_file_url, force=True)
