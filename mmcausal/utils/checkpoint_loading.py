"""Safe checkpoint loading: ``torch.load(weights_only=True)`` plus an explicit allow-list, for every source.

Every checkpoint mmcausal (and, through :mod:`mmcausal.compat`, mmengine's ``CheckpointLoader``) reads is
unpickled by torch's weights-only unpickler, which rebuilds tensors and plain containers only. On top of
torch's own set it may build exactly the classes in :func:`allowed_globals`: what the checkpoints of an
mmengine ``Runner`` for mmpretrain / mmseg / mmdet hold (``HistoryBuffer`` in the message hub, numpy arrays,
scalars and dtypes in it), torch's ``ShardedTensor`` and its metadata (the per-rank checkpoints of sharded FSDP
training) and ``argparse.Namespace`` (the ``args`` of official iLLaMA / deit files). The list was found by saving
real checkpoints of the twin configs (``tests/test_utils/test_checkpoint_loading.py`` and, for sharded ones,
``tests/test_engine/test_sharded_training.py`` check that every global they pickle is on it) and is applied
with ``torch.serialization.safe_globals``, i.e. only inside these loaders, never process-wide.

Anything else is refused with :class:`UnsafeCheckpointError`, naming the classes. The one opt-in is the
environment variable ``MMCAUSAL_UNSAFE_LOAD``: a list of files (paths or URLs, separated by ``os.pathsep``)
the user vouches for, which are then fully unpickled (``weights_only=False``, which can run arbitrary
code). It is a property of the job, not of a machine: every rank and every requeued container of the job
sees the same value, and nothing is recorded anywhere.

Model converters read foreign research checkpoints with :func:`extract_checkpoint_data`, which never runs
their code either: objects of classes outside torch's and our allow-list (a yacs ``CfgNode``, a payload)
come back as inert :class:`ForeignObject` placeholders, so the tensors can be taken out.
"""
import _compat_pickle
import argparse
import functools
import inspect
import os
import os.path as osp
import pickle
import zipfile
from typing import IO, Any, List, Optional, Sequence, Tuple, Union

import torch

from .errors import UserInputError

UNSAFE_LOAD_ENV = 'MMCAUSAL_UNSAFE_LOAD'
Source = Union[str, IO[bytes]]


class CheckpointFormatError(UserInputError, ValueError):
    """The file is not a ``torch.save`` checkpoint."""


class UnsafeCheckpointError(UserInputError, pickle.UnpicklingError):
    """A checkpoint pickles classes that are neither torch's nor on mmcausal's allow-list."""


def _allowed_attribute(owner: Any, name: str) -> Any:
    """``builtins.getattr`` as Runner checkpoints use it, and nothing more.

    ``torch.save`` pickles with protocol 2, which stores a function or nested class as ``getattr(owner, name)``:
    the functions in ``HistoryBuffer``'s statistics table (``getattr(HistoryBuffer, 'min')`` ...) and, in the
    per-rank checkpoints of sharded (FSDP) training, ``ShardedTensor.ProcessGroupState``. Only these are answered:
    a function defined on ``HistoryBuffer`` that is a statistic (the four defaults, which a fresh process has
    not registered yet, or a registered one), and that named tuple. A real ``getattr`` would reach anything.
    """
    from mmengine.logging import HistoryBuffer
    statistics = {'min', 'max', 'current', 'mean', *HistoryBuffer._statistics_methods}  # filled lazily
    if owner is HistoryBuffer and name in statistics and inspect.isfunction(vars(HistoryBuffer).get(name)):
        return vars(HistoryBuffer)[name]
    if name == 'ProcessGroupState' and torch.distributed.is_available():
        from torch.distributed._shard.sharded_tensor.api import ShardedTensor
        if owner is ShardedTensor:
            return ShardedTensor.ProcessGroupState
    raise pickle.UnpicklingError(f'getattr({owner!r}, {name!r}) is not allowed in a checkpoint')


def _sharded_tensor_globals() -> Tuple[Any, ...]:
    """torch's sharded-tensor containers, which the per-rank checkpoints of sharded training pickle (mmengine's
    ``FSDPStrategy`` with ``state_dict_cfg='local'``); empty without ``torch.distributed``. They are data classes
    that validate their fields (``ShardedTensor`` also the saved ranks and world size against the running process
    group) when they are rebuilt."""
    if not torch.distributed.is_available():
        return ()
    from torch.distributed._shard.metadata import ShardMetadata
    from torch.distributed._shard.sharded_tensor.api import ShardedTensor
    from torch.distributed._shard.sharded_tensor.metadata import (
        MEM_FORMAT_ENCODING,
        ShardedTensorMetadata,
        TensorProperties,
    )
    from torch.distributed._shard.sharded_tensor.shard import Shard
    from torch.distributed._shard.sharding_spec import ChunkShardingSpec, EnumerableShardingSpec
    from torch.distributed.remote_device import _remote_device
    return (ShardedTensor, ShardedTensor.ProcessGroupState, ShardedTensorMetadata, TensorProperties,
            MEM_FORMAT_ENCODING, Shard, ShardMetadata, ChunkShardingSpec, EnumerableShardingSpec, _remote_device)


@functools.lru_cache(maxsize=None)
def allowed_globals() -> Tuple[Any, ...]:
    """What mmcausal's loader may build beyond torch's weights-only set (``safe_globals`` entries).

    Each is harmless to build: numpy's array / scalar / dtype constructors, ``argparse.Namespace`` (a
    plain attribute bag), mmengine's ``HistoryBuffer`` (a data class, rebuilt by ``__dict__`` update), torch's
    sharded-tensor containers (:func:`_sharded_tensor_globals`) and, under the name ``builtins.getattr``,
    :func:`_allowed_attribute`.
    """
    import numpy as np
    from mmengine.logging import HistoryBuffer
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy < 2
        from numpy.core import multiarray
    # numpy 1.x pickles name ``numpy.core.multiarray``, numpy 2.x ``numpy._core.multiarray``: accept both
    numpy_functions = tuple((function, f'{package}.multiarray.{function.__name__}')
                            for function in (multiarray._reconstruct, multiarray.scalar)
                            for package in ('numpy.core', 'numpy._core'))
    # a dtype is rebuilt by BUILD on an instance of its class (``numpy.dtypes.Float64DType`` ...)
    dtype_classes = tuple(type(np.dtype(code)) for code in '?bBhHiIlLqQefdgFDGSUVOMm')
    return (HistoryBuffer, (_allowed_attribute, 'builtins.getattr'), argparse.Namespace, np.ndarray,
            np.dtype) + dtype_classes + numpy_functions + _sharded_tensor_globals()


def _entry_names() -> List[str]:
    """The qualified name of each :func:`allowed_globals` entry as pickles spell it."""
    return [entry[1] if isinstance(entry, tuple) else f'{entry.__module__}.{entry.__qualname__}'
            for entry in allowed_globals()]


def allowed_global_names() -> set:
    """The qualified names of :func:`allowed_globals` as pickles spell them."""
    return set(_entry_names())


def _open(source: Source) -> Tuple[IO[bytes], bool]:
    """A readable binary file for ``source`` and whether we opened it (and must close it)."""
    if not isinstance(source, (str, os.PathLike)):
        return source, False
    path = osp.expanduser(os.fspath(source))
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path!r}')
    return open(path, 'rb'), True


def _check_format(file: IO[bytes], name: str) -> None:
    """Raise :class:`CheckpointFormatError` unless ``file`` looks like a ``torch.save`` output."""
    start = file.tell()
    head = file.read(1)
    file.seek(start)
    if head == b'\x80':  # legacy (pre-zip) torch.save format: a pickle, protocol >= 2
        return
    if zipfile.is_zipfile(file):
        file.seek(start)
        with zipfile.ZipFile(file) as archive:
            names = archive.namelist()
        file.seek(start)
        if any(entry.endswith('data.pkl') for entry in names):
            return
    raise CheckpointFormatError(f'{name!r} is not a PyTorch checkpoint (not written by torch.save); '
                                'check the path, or re-download the file if it is truncated.')


def _foreign_globals(file: IO[bytes]) -> List[str]:
    """Globals in ``file`` that are neither torch's weights-only set nor :func:`allowed_globals`."""
    start = file.tell()
    if not zipfile.is_zipfile(file):  # legacy format: torch can only list globals of zip checkpoints
        file.seek(start)
        return []
    file.seek(start)
    found = torch.serialization.get_unsafe_globals_in_checkpoint(file)
    file.seek(start)
    allowed = allowed_global_names()
    return sorted(name for name in found if name not in allowed)


def _opted_in(name: str) -> bool:
    """Whether ``name`` (a path or URL) is listed in ``$MMCAUSAL_UNSAFE_LOAD``."""
    listed = [entry for entry in os.environ.get(UNSAFE_LOAD_ENV, '').split(os.pathsep) if entry]
    if '://' in name:
        return name in listed
    path = osp.realpath(osp.expanduser(name))
    return any('://' not in entry and osp.realpath(osp.expanduser(entry)) == path for entry in listed)


def load_checkpoint_file(source: Source, map_location: Optional[Any] = None, *,
                         name: Optional[str] = None) -> Any:
    """``torch.load`` ``source`` (a path or a binary file object) weights-only with the allow-list.

    Args:
        source: checkpoint path, or a binary file object positioned at its start.
        map_location: as for :func:`torch.load`.
        name: how to call the file in messages and match it against ``$MMCAUSAL_UNSAFE_LOAD`` (defaults
            to the path; a URL for downloaded files).

    Raises:
        FileNotFoundError: ``source`` is a path that does not exist.
        CheckpointFormatError: not written by ``torch.save``.
        UnsafeCheckpointError: it pickles a class outside the allow-list and is not opted in.
    """
    file, owned = _open(source)
    name = name or (os.fspath(source) if isinstance(source, (str, os.PathLike)) else '<file object>')
    try:
        _check_format(file, name)
        start = file.tell()
        try:
            with torch.serialization.safe_globals(list(allowed_globals())):
                return torch.load(file, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as error:
            reason = _torch_reason(error)
        file.seek(start)
        foreign = _foreign_globals(file)
        if not _opted_in(name):
            what = (f'pickles {", ".join(foreign)}, which mmcausal does not unpickle' if foreign else
                    f'cannot be unpickled weights-only ({reason})')
            raise UnsafeCheckpointError(f'{name} {what} (it could run arbitrary code). Only if you trust this '
                                        f'file: {UNSAFE_LOAD_ENV}={name}')
        file.seek(start)
        return torch.load(file, map_location=map_location, weights_only=False)
    finally:
        if owned:
            file.close()


def _torch_reason(error: pickle.UnpicklingError) -> str:
    """The informative line of torch's weights-only error (used when the globals cannot be listed)."""
    message = str(error)
    _, marker, detail = message.rpartition('WeightsUnpickler error:')
    lines = [line.strip() for line in (detail if marker else message).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


# --------------------------------------------------------------------------------------------------
# Foreign research checkpoints: take the data out, never run code
# --------------------------------------------------------------------------------------------------
class ForeignObject(dict):
    """Inert stand-in for an object of a class the unpickler must not build (a config node, a payload).

    It keeps what the pickle would have passed to the class: call arguments in ``args`` / ``kwargs``,
    ``__setstate__`` state in ``state`` and dict items as its own items (yacs' ``CfgNode`` is a dict).
    """

    qualified_name = '?'

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self.args, self.kwargs, self.state = args, kwargs, None

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f'ForeignObject({self.qualified_name}, {dict.__repr__(self)})'


def _placeholder_class(qualified_name: str) -> type:
    """A :class:`ForeignObject` subclass standing for the global ``qualified_name``."""
    return type(qualified_name.rpartition('.')[2], (ForeignObject, ), dict(qualified_name=qualified_name))


def _placeholder_getattr(owner: Any, name: str) -> Any:
    """``getattr`` during extraction: the allowed lookups (:func:`_allowed_attribute`), else a placeholder."""
    try:
        return _allowed_attribute(owner, name)
    except pickle.UnpicklingError:
        return _placeholder_class(f'{getattr(owner, "qualified_name", type(owner).__name__)}.{name}')


def _placeholder_unpickler(foreign: Sequence[str]) -> type:
    """A ``pickle`` module stand-in whose unpickler swaps the ``foreign`` globals for placeholders.

    Every other global is either in torch's weights-only set (looked up as usual) or in
    :func:`allowed_globals` (answered with the allowed object, never the real ``getattr``).
    """
    foreign = frozenset(foreign)
    allowed = {name: (entry[0] if isinstance(entry, tuple) else entry)
               for name, entry in zip(_entry_names(), allowed_globals())}
    allowed['builtins.getattr'] = _placeholder_getattr

    class PlaceholderUnpickler(pickle.Unpickler):

        def find_class(self, module: str, name: str) -> Any:
            # Python 2 names (``__builtin__.getattr`` in protocol-2 pickles), mapped as pickle itself does
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
            qualified = f'{module}.{name}'
            if qualified in foreign:
                return _placeholder_class(qualified)
            if qualified in allowed:
                return allowed[qualified]
            return super().find_class(module, name)

    namespace = type('PlaceholderPickle', (), {})
    namespace.Unpickler = PlaceholderUnpickler
    namespace.load = staticmethod(lambda file, **kwargs: PlaceholderUnpickler(file, **kwargs).load())
    namespace.__name__ = 'pickle'
    return namespace


def extract_checkpoint_data(path: str, map_location: Optional[Any] = 'cpu') -> Tuple[Any, List[str]]:
    """Load a foreign checkpoint without running any of its code.

    Every global the file names that is neither in torch's weights-only set nor in
    :func:`allowed_globals` is replaced by an inert :class:`ForeignObject` subclass, so
    tensors and plain containers come back intact and the rest as data. The globals torch *does* allow
    are its own vetted set (``torch.serialization.get_unsafe_globals_in_checkpoint`` lists the others).

    Returns:
        The loaded object and the sorted names of the globals that were replaced.
    """
    file, _ = _open(path)
    with file:
        _check_format(file, path)
        if not zipfile.is_zipfile(file):  # legacy format: torch cannot list its globals up front
            file.seek(0)
            return load_checkpoint_file(file, map_location, name=path), []
        file.seek(0)
        foreign = _foreign_globals(file)
        data = torch.load(file, map_location=map_location, weights_only=False,
                          pickle_module=_placeholder_unpickler(foreign))
        return data, foreign


__all__: List[str] = [
    'UNSAFE_LOAD_ENV', 'CheckpointFormatError', 'UnsafeCheckpointError', 'ForeignObject', 'allowed_globals',
    'allowed_global_names',
    'load_checkpoint_file', 'extract_checkpoint_data'
]
