"""Compatibility shims for the pinned stack (mmengine 0.10.7, torch 2.14, Python 3.11, CPU-only hosts).

Importing this module applies every shim once (re-importing is a no-op). ``mmcausal/__init__.py``
imports it first, so any entry point that imports mmcausal - our ``tools/``, or the stock OpenMMLab
tools through a config's ``custom_imports = dict(imports=['mmcausal'])`` - gets them before a
``Runner`` is built. Each shim below says what breaks, where it is fixed upstream and when it can go.

Names patched in mmengine:

* ``torch`` and ``load_url`` in ``mmengine.runner.checkpoint``, scheme ``file://``
                                                           -> :func:`patch_checkpoint_loading`
* ``load_state_dict`` in ``mmengine.runner.checkpoint`` and ``mmengine.runner``
                                                           -> :func:`patch_checkpoint_coverage`
* ``init_dist`` in ``mmengine.dist.utils``, ``mmengine.dist``, ``mmengine.runner.runner``,
  ``mmengine._strategy.distributed``                       -> :func:`patch_init_dist_for_cpu`
* ``MMDistributedDataParallel.__init__``                   -> :func:`patch_ddp_for_cpu`
* ``MMFullyShardedDataParallel.__init__``                  -> :func:`patch_fsdp_for_cpu`
* ``FSDPStrategy.optim_state_dict``, ``.load_optim_state_dict``
                                                           -> :func:`patch_fsdp_optimizer_state`
* ``FSDPStrategy.build_optim_wrapper``                     -> :func:`patch_fsdp_gradient_clipping`
* ``_is_builtin_module`` in ``mmengine.config.utils`` and ``mmengine.config.config``
                                                           -> :func:`patch_builtin_module_check`
* ``is_installed``/``get_installed_path`` in ``mmengine.utils.package_utils``, ``mmengine.utils``,
  ``mmengine.config.config``, ``mmengine.hub.hub``         -> :func:`patch_package_lookup`
* ``OptimWrapper.__init__``                                -> :func:`patch_optimizer_param_groups`
* ``set_random_seed`` in ``mmengine.runner.utils``, ``mmengine.runner``, ``mmengine.runner.runner``
                                                           -> :func:`patch_deterministic_cublas`

Names patched in mmcv:

* ``BaseTransform.__call__`` (data transforms)             -> :func:`patch_transform_file_errors`

Names patched in mmcv and mmdet (ops that have no bf16 kernel):

* ``MultiScaleDeformableAttnFunction.apply`` (mmcv), ``SingleRoIExtractor.forward`` (mmdet)
                                                           -> :func:`patch_ops_without_bf16`
"""
import contextlib
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import os.path as osp
import sys
import types
import urllib.parse
import urllib.request
import warnings
from typing import Any, Callable, Iterator, Optional

import torch
from mmengine.device import get_device
from mmengine.model import MMDistributedDataParallel, MMFullyShardedDataParallel
from mmengine.runner import CheckpointLoader

from mmcausal.utils.checkpoint_coverage import CheckpointMismatchError, check_checkpoint_coverage, size_mismatched_keys
from mmcausal.utils.checkpoint_loading import CheckpointFormatError, load_checkpoint_file
from mmcausal.utils.errors import UserInputError

_SHIM_FLAG = '__mmcausal_shim__'


def _is_shim(func: Callable) -> bool:
    """Whether ``func`` was installed by this module (keeps every patch idempotent)."""
    return getattr(func, _SHIM_FLAG, False)


def _install(name: str, new: Callable, *modules: str) -> None:
    """Mark ``new`` as a shim and bind it to ``name`` in every listed module that has that name.

    Modules that did ``from x import name`` hold their own reference, so each must be patched. A module
    that does not exist in the installed mmengine (e.g. ``mmengine._strategy`` before 0.8), or that no
    longer imports ``name``, is skipped: a shim never makes ``import mmcausal`` fail.
    """
    setattr(new, _SHIM_FLAG, True)
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            setattr(module, name, new)


# --------------------------------------------------------------------------------------------------
# S1. Checkpoints: every scheme through the safe loader
# --------------------------------------------------------------------------------------------------
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
    """Make every scheme of mmengine's ``CheckpointLoader`` load through :func:`load_checkpoint_file`.

    Breaks: mmengine 0.10.7 calls ``torch.load`` without ``weights_only`` (``runner/checkpoint.py``:
    local files, ``open-mmlab://`` files, ``pavi://``, ``s3://``) and ``http(s)://`` (also
    ``torchvision://``, ``open-mmlab://``, ``mmcls://``, which resolve to URLs) goes through
    ``torch.hub.load_state_dict_from_url``, which passes ``weights_only=False`` and so unpickles anything.
    Under torch >= 2.6 the first fail on Runner checkpoints (``HistoryBuffer``), the second runs any
    payload. The fix on mmengine ``main`` (open-mmlab/mmengine#1670) passes ``weights_only=False``
    everywhere, which is unsafe, so this shim stays even after a release: inside
    ``mmengine.runner.checkpoint`` (only there) ``torch.load`` is the safe loader, ``load_url`` downloads
    and then loads safely, and ``file://`` becomes a scheme. Code outside that module is untouched.
    """
    from mmengine.runner import checkpoint as checkpoint_module

    if isinstance(checkpoint_module.torch, _TorchWithSafeLoad):
        return
    checkpoint_module.torch = _TorchWithSafeLoad()
    checkpoint_module.load_url = _load_url
    CheckpointLoader.register_scheme(prefixes='file://', loader=_load_from_file_url, force=True)
    _patch_runner_checkpoint_form()


def _patch_runner_checkpoint_form() -> None:
    """``Runner.load_checkpoint`` (``tools/test.py``, ``load_from``) gets a dict with ``'state_dict'``.

    Breaks: mmengine 0.10.7 ``Runner.load_checkpoint`` hands the loaded object to the hooks' ``after_load_checkpoint``
    as it is; mmpretrain's ``EMAHook`` then reads ``checkpoint['state_dict']`` (a ``KeyError`` traceback for a bare
    state dict, which the model itself loads), and a file holding a tensor or a list fails deep in mmengine. Only the
    Runner's reference is patched: ``CheckpointLoader`` and ``load_checkpoint`` return files as they are.
    """
    from mmengine.runner import runner as runner_module

    load = runner_module._load_checkpoint
    if _is_shim(load):
        return

    @functools.wraps(load)
    def load_runner_checkpoint(filename: str, map_location: Optional[Any] = None, logger: Any = None) -> dict:
        return _as_runner_checkpoint(load(filename, map_location=map_location, logger=logger), filename)

    _install('_load_checkpoint', load_runner_checkpoint, 'mmengine.runner.runner')


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
    """Refuse a checkpoint that leaves most of the receiving module's weights unloaded.

    Breaks: mmengine 0.10.7 ``runner/checkpoint.py:58-139`` (``load_state_dict``, unchanged on ``main``) loads with
    ``strict=False`` for ``load_from``, ``Runner.load_checkpoint`` (``tools/test.py``) and ``Pretrained`` inits, and
    only logs a warning for missing keys and shape mismatches: a wrong checkpoint silently gives a randomly
    initialised model. Not a bug upstream (a choice), so this stays: after mmengine's own load, the keys it
    collected (through a load pre-hook on the receiving module, which torch hands its lists) go to
    :func:`mmcausal.utils.checkpoint_coverage.check_checkpoint_coverage`, which raises ``CheckpointMismatchError``
    unless the load runs inside ``partial_loads_allowed()``.
    """
    from mmengine.runner import checkpoint as checkpoint_module

    load_state_dict = checkpoint_module.load_state_dict
    if _is_shim(load_state_dict):
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

    _install('load_state_dict', checked_load_state_dict, 'mmengine.runner.checkpoint', 'mmengine.runner')


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


def patch_fsdp_for_cpu() -> None:
    """Give FSDP the CPU as its device when ``FSDPStrategy`` shards a model on a host without an accelerator.

    Breaks: ``FSDPStrategy._wrap_model`` (mmengine 0.10.7 ``_strategy/fsdp.py:154-157``) always passes
    ``device_id=int(LOCAL_RANK)``, which torch turns into an accelerator device, and without a ``device_id``
    torch >= 2.4 refuses a CPU module ("FSDP needs a non-CPU accelerator device, but no accelerator device is
    detected", ``fsdp/_init_utils.py``). An explicit ``device_id=torch.device('cpu')`` is supported: FSDP then
    shards, all-gathers and reduce-scatters on CPU over gloo (how the sharded-training test runs). On a CPU
    host this shim replaces an integer ``device_id`` by the CPU. No upstream fix; delete when mmengine
    passes the strategy's device.
    """
    init = MMFullyShardedDataParallel.__init__
    if _is_shim(init):
        return

    @functools.wraps(init)
    def __init__(self, module: torch.nn.Module, *args, **kwargs) -> None:
        if get_device() == 'cpu' and isinstance(kwargs.get('device_id'), int):
            kwargs['device_id'] = torch.device('cpu')
        init(self, module, *args, **kwargs)

    setattr(__init__, _SHIM_FLAG, True)
    MMFullyShardedDataParallel.__init__ = __init__


# --------------------------------------------------------------------------------------------------
# S6. Sharded training (FSDPStrategy of the FlexibleRunner)
# --------------------------------------------------------------------------------------------------
#: what an optimizer's own ``state_dict`` holds; an optimizer wrapper adds its entries next to them
_OPTIMIZER_KEYS = ('state', 'param_groups')


def patch_fsdp_optimizer_state() -> None:
    """Save and load the optimizer state of an ``FSDPStrategy`` run so that it resumes, with the wrapper's state.

    Breaks: ``FSDPStrategy.load_optim_state_dict`` (mmengine 0.10.7 ``_strategy/fsdp.py:410``, unchanged on
    ``main``) calls ``FSDP.optim_state_dict_to_load(state_dict, model, optimizer)``, the torch 2.0 order;
    torch >= 2.1 (pytorch/pytorch#96534) takes ``(model, optim, optim_state_dict)``, so every resume of an
    ``FSDPStrategy`` run fails with ``TypeError: unhashable type: 'dict'``. And ``optim_state_dict``
    (``:345``) hands FSDP the optimizer *wrapper*, whose state FSDP rebuilds from the optimizer's alone: the
    wrapper's own entries are lost (``AmpOptimWrapper``'s loss scale, so a resumed AMP run starts again from
    the initial scale; ``base_param_settings``, so it logs a wrong ``base_lr``). This shim passes the
    arguments by name, gives FSDP the optimizer and keeps the wrapper's entries next to FSDP's state, where
    ``OptimWrapper.load_state_dict`` expects them. Delete when mmengine does both.
    """
    from mmengine._strategy import FSDPStrategy
    from torch.distributed.fsdp import FullyShardedDataParallel

    if _is_shim(FSDPStrategy.load_optim_state_dict):
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
        setattr(method, _SHIM_FLAG, True)
        setattr(FSDPStrategy, method.__name__, method)


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
    """Clip gradients by the norm of the whole model, not of each rank's shard, under ``FSDPStrategy``.

    Breaks: ``OptimWrapper`` clips with ``torch.nn.utils.clip_grad_norm_`` over the optimizer's parameters
    (mmengine 0.10.7 ``optim/optimizer/optimizer_wrapper.py:285-298``), which under FSDP are the rank's shards:
    every rank computes the norm of its own shard and scales its part of the gradient by its own factor (the
    logged ``grad_norm`` differs between ranks). ``FSDPStrategy.build_optim_wrapper`` (unchanged on ``main``)
    leaves it so. This shim makes the wrappers it builds clip through the root FSDP module's ``clip_grad_norm_``,
    which reduces the norm over all ranks (value clipping is element-wise and stays as it is). Delete when
    mmengine clips FSDP models through FSDP.
    """
    from mmengine._strategy import FSDPStrategy
    from mmengine.optim import OptimWrapperDict

    build = FSDPStrategy.build_optim_wrapper
    if _is_shim(build):
        return

    @functools.wraps(build)
    def build_optim_wrapper(self, optim_wrapper: Any, model: Optional[torch.nn.Module] = None) -> Any:
        built = build(self, optim_wrapper, model)
        for wrapper in built.values() if isinstance(built, OptimWrapperDict) else [built]:
            if getattr(wrapper, 'clip_func', None) is torch.nn.utils.clip_grad_norm_:
                wrapper.clip_func = functools.partial(_clip_sharded_grad_norm, model)
        return built

    setattr(build_optim_wrapper, _SHIM_FLAG, True)
    FSDPStrategy.build_optim_wrapper = build_optim_wrapper


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
    if _is_shim(original) or all(original(name) for name in ('os', 'math', 'os.path')):
        return  # already patched, or an mmengine with the upstream fix

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

    if _is_shim(package_utils.is_installed) or 'pkg_resources' not in inspect.getsource(package_utils):
        return  # already patched, or an mmengine with the upstream fix
    users = ('mmengine.utils.package_utils', 'mmengine.utils', 'mmengine.config.config')
    _install('is_installed', _is_installed, *users)
    _install('get_installed_path', _get_installed_path, *users, 'mmengine.hub.hub')


# --------------------------------------------------------------------------------------------------
# S7. GPU numerics: mmcv ops without bf16 kernels, deterministic cuBLAS
# --------------------------------------------------------------------------------------------------
def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    """``value`` with every floating-point tensor in it (also inside tuples and lists) cast to ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_cast_floats(item, dtype) for item in value)
    return value


def _first_tensor(values: Any) -> Optional[torch.Tensor]:
    for value in values:
        found = value if isinstance(value, torch.Tensor) else \
            _first_tensor(value) if isinstance(value, (tuple, list)) else None
        if found is not None:
            return found
    return None


def _fp32_under_bf16_autocast(func: Callable) -> Callable:
    """``func`` that, under bf16 autocast on its inputs' device, runs with autocast off on fp32 copies of its
    floating-point inputs and returns its floating-point outputs in bf16; otherwise ``func`` unchanged."""
    @functools.wraps(func)
    def in_fp32(*args: Any, **kwargs: Any) -> Any:
        tensor = _first_tensor(list(args) + list(kwargs.values()))
        device = tensor.device.type if tensor is not None else None
        if device is None or not torch.is_autocast_enabled(device) or \
                torch.get_autocast_dtype(device) != torch.bfloat16:
            return func(*args, **kwargs)
        with torch.autocast(device, enabled=False):
            out = func(*_cast_floats(args, torch.float32),
                       **{key: _cast_floats(value, torch.float32) for key, value in kwargs.items()})
        return _cast_floats(out, torch.bfloat16)

    setattr(in_fp32, _SHIM_FLAG, True)
    return in_fp32


def patch_ops_without_bf16() -> None:
    """Run mmcv 2.1's RoIAlign, multi-scale deformable attention and NMS in fp32 under bf16 autocast.

    Breaks: their CUDA (and CPU) kernels dispatch on float, double and half only, so Mask R-CNN (RoIAlign in
    mmdet's ``SingleRoIExtractor``) and DINO (``MultiScaleDeformableAttnFunction``) stop with "not implemented
    for 'BFloat16'" under bf16 AMP; mmcv's CPU NMS needs boxes and scores of one dtype, and under autocast bf16
    scores meet fp32 boxes. mmdet also casts the RoIs to the features' dtype, which in bf16 puts box corners
    beyond 512 px on a 4-px grid. Under bf16 autocast only, the RoI extractor (level mapping and RoIAlign), the
    deformable-attention kernel and NMS now run with autocast off on fp32 inputs (the projections around them
    stay in bf16) and hand bf16 on; fp16 and fp32 runs are untouched. mmcv 2.1 is the last release mmdet 3.3 and
    mmseg 1.2 accept; keep while it is pinned.
    """
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction
    from mmcv.ops.nms import NMSop
    from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor

    if not _is_shim(SingleRoIExtractor.forward):
        SingleRoIExtractor.forward = _fp32_under_bf16_autocast(SingleRoIExtractor.forward)
    for function in (MultiScaleDeformableAttnFunction, NMSop):
        if not _is_shim(function.apply):
            function.apply = staticmethod(_fp32_under_bf16_autocast(function.apply))


#: cuBLAS's deterministic workspace setting (torch's reproducibility notes; ``:16:8`` uses less memory)
CUBLAS_DETERMINISTIC_WORKSPACE = ':4096:8'


def patch_deterministic_cublas() -> None:
    """Make ``randomness=dict(deterministic=True)`` also set ``CUBLAS_WORKSPACE_CONFIG``.

    Breaks: mmengine's ``set_random_seed(deterministic=True)`` calls ``torch.use_deterministic_algorithms(True)``,
    after which the first CUDA matmul raises unless ``CUBLAS_WORKSPACE_CONFIG`` is set; cuBLAS reads it when its
    first handle is created, which is after the Runner sets its randomness. A value the user set is kept. Not in
    mmengine ``main``; keep.
    """
    from mmengine.runner import utils as runner_utils

    original = runner_utils.set_random_seed
    if _is_shim(original):
        return

    @functools.wraps(original)
    def set_random_seed(seed: Optional[int] = None, deterministic: bool = False, diff_rank_seed: bool = False) -> int:
        if deterministic:
            os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', CUBLAS_DETERMINISTIC_WORKSPACE)
        return original(seed, deterministic, diff_rank_seed)

    _install('set_random_seed', set_random_seed, 'mmengine.runner.utils', 'mmengine.runner', 'mmengine.runner.runner')


# --------------------------------------------------------------------------------------------------
# S8. torch.compile of mmengine's train_step: plain-dict parameter groups
# --------------------------------------------------------------------------------------------------
def patch_optimizer_param_groups() -> None:
    """Make the parameter groups of every ``OptimWrapper``'s optimizer plain dicts.

    Breaks: mmengine 0.10.7's ``DefaultOptimWrapperConstructor`` assigns the list of groups into the optimizer's
    ``ConfigDict``, which turns every group into a ``ConfigDict``. ``cfg.compile = True`` compiles ``train_step``,
    optimizer step included, and torch 2.14's tracer takes only plain dicts there: the first iteration fails with
    ``'UserDefinedDictVariable' object has no attribute 'items'``. Not fixed upstream; delete when the constructor
    keeps plain dicts.
    """
    from mmengine.optim import OptimWrapper

    original = OptimWrapper.__init__
    if _is_shim(original):
        return

    @functools.wraps(original)
    def __init__(self, optimizer: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> None:
        groups = optimizer.param_groups
        groups[:] = [dict(group) for group in groups]
        original(self, optimizer, *args, **kwargs)

    setattr(__init__, _SHIM_FLAG, True)
    OptimWrapper.__init__ = __init__


# --------------------------------------------------------------------------------------------------
# S9. A sample file that cannot be read names itself, also in a DataLoader worker
# --------------------------------------------------------------------------------------------------
def patch_transform_file_errors() -> None:
    """Raise a data transform's file error (a missing, empty, truncated or undecodable image or segmentation map) as
    :class:`~mmcausal.utils.dataset_check.DatasetFormatError` naming the file, where the transform runs.

    Breaks: mmcv's ``LoadImageFromFile`` and the loaders of mmseg / mmdet raise OpenCV's ``!buf.empty()`` or PIL's
    ``cannot identify image file`` without the file's path, and torch re-raises a DataLoader worker's error in the
    main process from its message alone, so the file (known only from the transform's frame) is lost. Other errors
    pass unchanged, with the original chained as the cause. Not fixed upstream; delete when the loaders name the file.
    """
    from mmcv.transforms import BaseTransform

    from mmcausal.utils.dataset_check import sample_loading_error

    original = BaseTransform.__call__
    if _is_shim(original):
        return

    @functools.wraps(original)
    def __call__(self, results: dict) -> Any:
        try:
            return original(self, results)
        except Exception as error:
            named = sample_loading_error(error)
            if named is None:
                raise
            raise named from error

    setattr(__call__, _SHIM_FLAG, True)
    BaseTransform.__call__ = __call__


def apply_all() -> None:
    """Apply every shim (idempotent)."""
    patch_checkpoint_loading()
    patch_checkpoint_coverage()
    patch_init_dist_for_cpu()
    patch_ddp_for_cpu()
    patch_fsdp_for_cpu()
    patch_fsdp_optimizer_state()
    patch_fsdp_gradient_clipping()
    patch_builtin_module_check()
    patch_package_lookup()
    patch_ops_without_bf16()
    patch_deterministic_cublas()
    patch_optimizer_param_groups()
    patch_transform_file_errors()


apply_all()
