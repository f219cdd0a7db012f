"""Compatibility shims for the pinned stack (mmengine 0.10.7, torch 2.14, Python 3.11, CPU-only hosts).

Importing this module applies every shim once (re-importing is a no-op). ``mmcausal/__init__.py``
imports it first, so any entry point that imports mmcausal - our ``tools/``, or the stock OpenMMLab
tools through a config's ``custom_imports = dict(imports=['mmcausal'])`` - gets them before a
``Runner`` is built. Each shim below says what breaks, where it is fixed upstream and when it can go.

Names patched in mmengine:

* ``CheckpointLoader`` scheme ``''`` (local files)       -> :func:`patch_checkpoint_loading`
* ``mmengine.runner.runner.save_checkpoint``              -> :func:`patch_runner_save_checkpoint`
* ``init_dist`` in ``mmengine.dist.utils``, ``mmengine.dist``, ``mmengine.runner.runner``,
  ``mmengine._strategy.distributed``                       -> :func:`patch_init_dist_for_cpu`
* ``MMDistributedDataParallel.__init__``                   -> :func:`patch_ddp_for_cpu`
* ``_is_builtin_module`` in ``mmengine.config.utils`` and ``mmengine.config.config``
                                                           -> :func:`patch_builtin_module_check`
* ``is_installed``/``get_installed_path`` in ``mmengine.utils.package_utils``, ``mmengine.utils``,
  ``mmengine.config.config``, ``mmengine.hub.hub``         -> :func:`patch_package_lookup`
"""
import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import os.path as osp
import sys
import warnings
from typing import Any, Callable, Iterator, Optional

import torch
from mmengine.device import get_device
from mmengine.fileio import LocalBackend, get_file_backend
from mmengine.model import MMDistributedDataParallel
from mmengine.runner import CheckpointLoader

from mmcausal.utils.checkpoint_trust import load_checkpoint_file, trust_checkpoint

_SHIM_FLAG = '__mmcausal_shim__'


def _is_shim(func: Callable) -> bool:
    """Whether ``func`` was installed by this module (keeps every patch idempotent)."""
    return getattr(func, _SHIM_FLAG, False)


def _install(name: str, new: Callable, *modules: str) -> None:
    """Mark ``new`` as a shim and bind it to ``name`` in every listed module.

    Modules that did ``from x import name`` hold their own reference, so each must be patched.
    """
    setattr(new, _SHIM_FLAG, True)
    for module in modules:
        setattr(importlib.import_module(module), name, new)


# --------------------------------------------------------------------------------------------------
# S1. Checkpoints under torch.load(weights_only=True)
# --------------------------------------------------------------------------------------------------
def _load_from_local(filename: str, map_location: Optional[Any] = None) -> Any:
    """mmengine local-file loader that refuses untrusted pickles (see ``checkpoint_trust``)."""
    return load_checkpoint_file(filename, map_location)


def patch_checkpoint_loading() -> None:
    """Route mmengine's local checkpoint loading through :func:`load_checkpoint_file`.

    Breaks: since torch 2.6 ``torch.load`` defaults to ``weights_only=True``; mmengine 0.10.7's
    ``load_from_local`` (``runner/checkpoint.py:347``) passes nothing, and Runner checkpoints pickle
    ``HistoryBuffer`` and numpy scalars, so ``resume``, ``load_from``, ``Pretrained`` init and
    ``init_model``/``init_detector`` raise ``UnpicklingError``. Rather than turning weights_only off
    (upstream fix: open-mmlab/mmengine#1670, commits 151a87ab/93afd47d, only on ``main``), files are
    loaded weights-only unless trusted. Delete when an mmengine release loads checkpoints safely and
    Runner checkpoints load under weights_only (no release after 0.10.7 as of 2026-11).
    """
    CheckpointLoader.register_scheme(prefixes='', loader=_load_from_local, force=True)


def _is_local_path(filename: str, backend_args: Optional[dict]) -> bool:
    """Whether mmengine stores ``filename`` on the local file system."""
    return isinstance(get_file_backend(filename, backend_args=backend_args), LocalBackend)


def patch_runner_save_checkpoint() -> None:
    """Record every checkpoint a ``Runner`` writes to local disk in the trust store.

    Needed by :func:`patch_checkpoint_loading`: a Runner must be able to resume from the files it
    wrote itself (they pickle ``HistoryBuffer``). ``Runner.save_checkpoint`` (used by
    ``CheckpointHook`` for periodic, best and last checkpoints) calls the name it imported from
    ``mmengine.runner.checkpoint``, so only the Runner's saves are recorded, not every caller of
    ``mmengine.runner.save_checkpoint``. Saves through the deprecated ``file_client_args`` and
    remote backends are not recorded. Delete together with :func:`patch_checkpoint_loading`.
    """
    from mmengine.runner import runner as runner_module

    save = runner_module.save_checkpoint
    if _is_shim(save):
        return

    @functools.wraps(save)
    def save_checkpoint(checkpoint: dict,
                        filename: str,
                        file_client_args: Optional[dict] = None,
                        backend_args: Optional[dict] = None) -> None:
        save(checkpoint, filename, file_client_args=file_client_args, backend_args=backend_args)
        if file_client_args is None and _is_local_path(filename, backend_args):
            trust_checkpoint(filename)

    _install('save_checkpoint', save_checkpoint, 'mmengine.runner.runner')


# --------------------------------------------------------------------------------------------------
# S5. Distributed training on CPU (gloo)
# --------------------------------------------------------------------------------------------------
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
    """Let ``init_dist`` start a gloo process group on hosts without an accelerator.

    Breaks: mmengine 0.10.7 ``dist/utils.py:130`` (pytorch launcher), ``:164`` (mpi) and ``:221``
    (slurm) call ``torch.cuda.set_device(local_rank)`` unconditionally, which raises on CPU-only hosts
    (``Found no NVIDIA driver`` / no ``_cuda_setDevice``), and the OpenMMLab runtime bases ask for
    ``backend='nccl'``, which needs GPUs. On a CPU host (``mmengine.device.get_device() == 'cpu'``)
    this shim swaps ``nccl`` for ``gloo`` (warning once) and skips ``set_device``. No upstream fix
    (mmengine ``main`` unchanged); delete when mmengine skips ``set_device`` without CUDA.
    """
    from mmengine.dist import utils as dist_utils

    init_dist = dist_utils.init_dist
    if _is_shim(init_dist):
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

    _install('init_dist', cpu_aware_init_dist, 'mmengine.dist.utils', 'mmengine.dist',
             'mmengine.runner.runner', 'mmengine._strategy.distributed')


def patch_ddp_for_cpu() -> None:
    """Drop ``device_ids``/``output_device`` when ``MMDistributedDataParallel`` wraps a CPU module.

    Breaks: ``Runner.wrap_model`` (mmengine 0.10.7 ``runner.py:898-911``) always passes
    ``device_ids=[LOCAL_RANK]``; torch's ``DistributedDataParallel`` raises ``ValueError`` ("device_ids
    and output_device arguments only work with single-device/multiple-device GPU modules") for a CPU
    module. No upstream fix; delete when mmengine passes ``device_ids`` only for accelerator modules.
    """
    init = MMDistributedDataParallel.__init__
    if _is_shim(init):
        return

    @functools.wraps(init)
    def __init__(self, module: torch.nn.Module, *args, **kwargs) -> None:
        if {param.device.type for param in module.parameters()} == {'cpu'}:
            kwargs.pop('device_ids', None)
            kwargs.pop('output_device', None)
        init(self, module, *args, **kwargs)

    setattr(__init__, _SHIM_FLAG, True)
    MMDistributedDataParallel.__init__ = __init__


# --------------------------------------------------------------------------------------------------
# S3. Config parser: standard-library detection on Python >= 3.11 / virtualenvs
# --------------------------------------------------------------------------------------------------
def patch_builtin_module_check() -> None:
    """Classify every standard-library module as built-in in mmengine's config parser.

    Breaks: mmengine 0.10.7 ``config/utils.py:159-185`` decides by the module's file location, but on
    CPython >= 3.11 ``os`` is frozen (origin ``'frozen'``) and in a venv the stdlib is outside
    ``sys.prefix``, so ``os``/``math`` count as third-party. An old-style config with ``import os``
    before ``_base_`` is then parsed as a lazy-import config and fails (``ConfigParsingError``).
    Fixed on mmengine ``main`` (e6d41991, 61f9f035), unreleased; delete with the next release.
    Note: stock tools parse the config before ``custom_imports`` runs, so they still need ``_base_``
    before any ``import``.
    """
    from mmengine.config import utils as config_utils

    original = config_utils._is_builtin_module
    if _is_shim(original):
        return

    @functools.wraps(original)
    def _is_builtin_module(module_name: str) -> bool:
        return module_name.split('.')[0] in sys.stdlib_module_names or original(module_name)

    _install('_is_builtin_module', _is_builtin_module, 'mmengine.config.utils',
             'mmengine.config.config')


# --------------------------------------------------------------------------------------------------
# S2. Package lookup without pkg_resources
# --------------------------------------------------------------------------------------------------
def _is_installed(package: str) -> bool:
    """``mmengine.utils.is_installed`` on ``importlib.metadata``."""
    try:
        importlib.metadata.distribution(package)
        return True
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        return spec is not None and spec.origin is not None


def _get_installed_path(package: str) -> str:
    """``mmengine.utils.get_installed_path`` on ``importlib.metadata`` (same results)."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        spec = importlib.util.find_spec(package)
        if spec is None:
            raise
        if spec.origin is None:
            raise RuntimeError(f'{package} is a namespace package, which is invalid for '
                               '`get_install_path`')
        return osp.dirname(spec.origin)
    location = str(dist.locate_file(''))
    if osp.exists(osp.join(location, package)):
        return osp.join(location, package)
    top_level = (dist.read_text('top_level.txt') or '').split()
    if not top_level:
        raise ValueError(f'can not infer the module name of {package}')
    return osp.join(location, top_level[0])


def patch_package_lookup() -> None:
    """Replace mmengine's ``pkg_resources``-based package lookup with ``importlib.metadata``.

    Breaks: mmengine 0.10.7 ``utils/package_utils.py:17,48,85`` import ``pkg_resources``, which
    setuptools >= 82 removed and setuptools 81 deprecates with a warning; they resolve every
    ``_base_ = ['mmdet::...']``/``'mmseg::...'`` config (``config.py:1265-1271``), lazy-config
    imports and ``mmengine.hub``. We pin setuptools<82, so this only removes the deprecated path and
    survives an upgrade. Fixed on mmengine ``main`` (b5d35802, 9ef0785c), unreleased; delete with the
    next release.
    """
    from mmengine.utils import package_utils

    if _is_shim(package_utils.is_installed):
        return
    users = ('mmengine.utils.package_utils', 'mmengine.utils', 'mmengine.config.config')
    _install('is_installed', _is_installed, *users)
    _install('get_installed_path', _get_installed_path, *users, 'mmengine.hub.hub')


def apply_all() -> None:
    """Apply every shim (idempotent)."""
    patch_checkpoint_loading()
    patch_runner_save_checkpoint()
    patch_init_dist_for_cpu()
    patch_ddp_for_cpu()
    patch_builtin_module_check()
    patch_package_lookup()


apply_all()
