"""Safe checkpoint loading under ``torch.load(weights_only=True)`` (the default since torch 2.6).

Every file is first loaded with ``weights_only=True``, which can only rebuild tensors and plain
containers. A file that pickles anything else (mmengine's ``HistoryBuffer``, numpy scalars, an
``argparse.Namespace``...) is fully unpickled (``weights_only=False``, which can run arbitrary code)
only if it is *trusted*:

* its sha256 is in the local trust store, where :mod:`mmcausal.compat` records every checkpoint an
  mmengine ``Runner`` writes on this machine, and where ``python tools/misc/trust_checkpoint.py FILE``
  records a foreign file you vouch for; or
* the caller passes ``trust=True`` (the ``--trust`` flag of the model converters).

The store is ``${MMCAUSAL_HOME:-~/.cache/mmcausal}/trusted_checkpoints.txt``, one
``<sha256> <absolute path at write time>`` line per file. It is append-only and each line is written
with a single ``O_APPEND`` write, so concurrent writers (several Runners, several ranks) are safe.
Trust follows the content: a copy stays trusted, an edited file is no longer trusted.
"""
import hashlib
import os
import os.path as osp
import pickle
import re
import shlex
import zipfile
from typing import IO, Any, Optional, Set

import torch

TRUST_CLI = 'python tools/misc/trust_checkpoint.py'
_STORE_NAME = 'trusted_checkpoints.txt'
_HASH_CHUNK = 1 << 20
_ANSI_ESCAPE = re.compile(r'\x1b\[[0-9;]*m')


class UntrustedCheckpointError(RuntimeError):
    """A checkpoint needs full unpickling but is neither trusted nor loaded with ``trust=True``."""


class CheckpointFormatError(ValueError):
    """The file is not a ``torch.save`` checkpoint."""


def trust_store_path() -> str:
    """Path of the trust store (``$MMCAUSAL_HOME``, default ``~/.cache/mmcausal``)."""
    home = os.environ.get('MMCAUSAL_HOME') or osp.join('~', '.cache', 'mmcausal')
    return osp.join(osp.expanduser(home), _STORE_NAME)


def _sha256(file: IO[bytes]) -> str:
    """sha256 of an open binary file, read from its start."""
    file.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: file.read(_HASH_CHUNK), b''):
        digest.update(chunk)
    file.seek(0)
    return digest.hexdigest()


def _trusted_hashes() -> Set[str]:
    """All sha256 digests recorded in the trust store."""
    try:
        with open(trust_store_path(), encoding='utf-8') as store:
            return {line.split(maxsplit=1)[0] for line in store if line.strip()}
    except FileNotFoundError:
        return set()


def _open_checkpoint(path: str) -> IO[bytes]:
    """Open ``path`` for reading, with a clear error if it does not exist."""
    path = osp.expanduser(path)
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path!r}')
    return open(path, 'rb')


def trust_checkpoint(path: str) -> str:
    """Record ``path``'s content as trusted for full unpickling; return its sha256.

    Only call this for files you wrote yourself or whose origin you trust: a trusted file is loaded
    with ``weights_only=False``, and unpickling can execute arbitrary code.
    """
    with _open_checkpoint(path) as file:
        digest = _sha256(file)
    if digest in _trusted_hashes():
        return digest
    store = trust_store_path()
    os.makedirs(osp.dirname(store), exist_ok=True)
    line = f'{digest} {osp.abspath(osp.expanduser(path))}\n'.encode()
    fd = os.open(store, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return digest


def is_trusted(path: str) -> bool:
    """Whether the current content of ``path`` is recorded in the trust store."""
    with _open_checkpoint(path) as file:
        return _sha256(file) in _trusted_hashes()


def _check_format(file: IO[bytes], path: str) -> None:
    """Raise :class:`CheckpointFormatError` unless ``file`` looks like a ``torch.save`` output."""
    head = file.read(1)
    file.seek(0)
    if head == b'\x80':  # legacy (pre-zip) torch.save format: a pickle, protocol >= 2
        return
    if zipfile.is_zipfile(file):
        with zipfile.ZipFile(file) as archive:
            if any(name.endswith('data.pkl') for name in archive.namelist()):
                file.seek(0)
                return
    raise CheckpointFormatError(f'{path!r} is not a PyTorch checkpoint (not written by torch.save).')


def _refusal_reason(error: pickle.UnpicklingError) -> str:
    """The informative line of torch's weights-only error (which global was refused)."""
    message = _ANSI_ESCAPE.sub('', str(error))
    _, marker, detail = message.rpartition('WeightsUnpickler error:')
    lines = [line.strip() for line in (detail if marker else message).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def _untrusted_error(path: str, reason: str) -> UntrustedCheckpointError:
    return UntrustedCheckpointError(
        f'Refusing to fully unpickle checkpoint {path!r}: torch\'s weights-only loader refused it '
        f'(it pickles more than tensors and plain containers), and it was neither written by an '
        f'mmengine Runner on this machine nor marked as trusted.\n  torch: {reason}\n'
        f'If you trust where this file comes from (unpickling can run arbitrary code), either run\n'
        f'    {TRUST_CLI} {shlex.quote(path)}\n'
        f'once and load it again, or, for a model converter, pass its --trust flag.')


def load_checkpoint_file(path: str, map_location: Optional[Any] = None, *, trust: bool = False) -> Any:
    """``torch.load`` a checkpoint safely.

    Loads with ``weights_only=True``. If torch refuses a pickled global, the file is loaded with
    ``weights_only=False`` only when ``trust`` is set or the file is in the trust store; otherwise
    :class:`UntrustedCheckpointError` explains how to opt in. The file is opened once, so the content
    that is hashed is the content that is loaded.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        CheckpointFormatError: ``path`` was not written by ``torch.save``.
        UntrustedCheckpointError: full unpickling needed but not allowed.
    """
    with _open_checkpoint(path) as file:
        _check_format(file, path)
        try:
            return torch.load(file, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as error:
            reason = _refusal_reason(error)
        if not (trust or _sha256(file) in _trusted_hashes()):
            raise _untrusted_error(path, reason)
        file.seek(0)
        return torch.load(file, map_location=map_location, weights_only=False)
