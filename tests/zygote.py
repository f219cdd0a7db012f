"""Run the suite's ``python SCRIPT.py ...`` commands from a process that has imported the third-party stack already.

A fresh interpreter spends about 15 s of one core importing torch, mmengine and the three OpenMMLab model packages
before a tool does anything, and the suite runs well over a hundred tools (training runs, converters, samplers, the
bad-input catalogue). :func:`run_python` runs such a command as a fork of a *zygote*: one process per pytest worker
that imports those packages (and never mmcausal or anything of this repository) once. The fork then does what the
interpreter does for ``python SCRIPT.py ARGS``: it takes the command's working directory, environment, ``sys.argv``
and ``sys.path[0]`` (the script's folder), stdin from ``/dev/null`` and stdout / stderr into files, draws fresh seeds
for ``random``, NumPy and torch (a new interpreter's are random too), imports mmcausal and the rest itself,
runs the script as ``__main__`` and leaves through the interpreter's normal exit (``atexit``, an uncaught exception
printed with exit status 1, ``SystemExit`` codes). The caller gets the ``CompletedProcess`` of ``subprocess.run``.

What a fork cannot take from the command, a fresh interpreter runs instead: other interpreter options (``-c``,
``-m``, stdin input), an environment that differs from the worker's in a variable read at start-up (anything
outside :data:`RUN_TIME_ENV` and ``MMCAUSAL_*``), or one without ``OMP_NUM_THREADS`` (which the fork applies with
``torch.set_num_threads``), and every command when ``MMCAUSAL_TEST_FRESH_PROCESSES=1``. Warnings that the
third-party imports raise are printed once by the zygote, not by each command. Run as a script, this file is the
zygote (its requests and replies: one line each way).
"""
import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
FRESH_ENV = 'MMCAUSAL_TEST_FRESH_PROCESSES'
#: The environment variables a command may set differently from the worker's and still run in a fork: read when
#: used, not when the interpreter or the third-party packages start (``MMCAUSAL_*`` are too; ``OMP_NUM_THREADS`` the
#: fork applies). Any other difference (``PYTHONPATH``, ``TORCHDYNAMO_DISABLE``, ...) takes a fresh interpreter.
RUN_TIME_ENV = frozenset({'OMP_NUM_THREADS', 'HOME', 'PYTEST_CURRENT_TEST'})
#: What the zygote imports: the third-party packages every tool of ours loads (never mmcausal).
PRELOAD = ('numpy', 'PIL.Image', 'torch', 'torchvision', 'mmengine.runner', 'mmengine.model', 'mmcv.ops',
           'mmpretrain.models', 'mmpretrain.datasets', 'mmpretrain.evaluation', 'mmseg.models', 'mmseg.datasets',
           'mmseg.evaluation', 'mmdet.models', 'mmdet.datasets', 'mmdet.evaluation')


# ------------------------------------------------------------------------------------------------ the zygote


def _run_forked(request: dict) -> None:
    """In the fork: become ``python SCRIPT ARGS`` of ``request`` and exit with its status (never returns)."""
    import random

    import numpy as np
    import torch

    os.setsid()  # its own process group: a timeout kills the command with its data-loader workers
    os.chdir(request['cwd'])
    os.environ.clear()
    os.environ.update(request['env'])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request['stdout'], os.O_WRONLY | os.O_CREAT),
                            (2, request['stderr'], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
    random.seed()
    np.random.seed()
    torch.seed()
    script = request['argv'][1]
    sys.argv = list(request['argv'][1:])
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    import runpy
    runpy.run_path(script, run_name='__main__')  # an exception propagates: the interpreter prints it, status 1
    sys.exit(0)


def serve() -> None:
    """The zygote: import :data:`PRELOAD`, then for each request line on stdin fork a command and reply with its
    pid, then its exit status (negative: killed by that signal), one line each."""
    import importlib
    for module in PRELOAD:
        importlib.import_module(module)
    requests, replies = sys.stdin.buffer, os.fdopen(os.dup(1), 'wb', buffering=0)
    replies.write(b'ready\n')
    for line in requests:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            replies.close()
            _run_forked(request)
        replies.write(f'{pid}\n'.encode())
        _, status = os.waitpid(pid, 0)
        replies.write(f'{os.waitstatus_to_exitcode(status)}\n'.encode())


# ------------------------------------------------------------------------------------------------ the client


class _Zygote:
    """This worker's zygote process and the protocol with it."""

    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        cwd=ROOT, env=self.env, bufsize=0)
        atexit.register(self.close)
        if self._read_line(timeout=300) != 'ready':
            raise RuntimeError('the zygote did not start')

    def _read_line(self, timeout: Optional[float]) -> Optional[str]:
        """The next reply line, or ``None`` after ``timeout`` seconds."""
        line = b''
        while not line.endswith(b'\n'):
            if not select.select([self.process.stdout], [], [], timeout)[0]:
                return None
            byte = self.process.stdout.read(1)
            if not byte:
                raise RuntimeError(f'the zygote exited (status {self.process.wait()})')
            line += byte
        return line.decode().strip()

    def accepts(self, args: Sequence[str], env: Mapping[str, str], input: Optional[str]) -> bool:
        """Whether a fork can run ``args`` in ``env`` as a fresh interpreter would (see the module docstring)."""
        changed = {key for key in {*env, *self.env} if env.get(key) != self.env.get(key)}
        return (len(args) > 1 and args[0] == sys.executable and str(args[1]).endswith('.py') and input is None
                and 'OMP_NUM_THREADS' in env and env.get(FRESH_ENV, '') in ('', '0') and self.process.poll() is None
                and all(key in RUN_TIME_ENV or key.startswith('MMCAUSAL_') for key in changed))

    def run(self, args: Sequence[str], cwd: Path, env: Mapping[str, str],
            timeout: Optional[float]) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix='zygote-') as folder:
            stdout, stderr = Path(folder) / 'stdout', Path(folder) / 'stderr'
            request = dict(argv=[str(arg) for arg in args], cwd=str(cwd), env=dict(env), stdout=str(stdout),
                           stderr=str(stderr))
            self.process.stdin.write((json.dumps(request) + '\n').encode())
            pid = int(self._read_line(timeout=60))
            status = self._read_line(timeout)
            if status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                self._read_line(timeout=60)
                raise subprocess.TimeoutExpired(list(args), timeout, stdout.read_text(errors='replace'),
                                                stderr.read_text(errors='replace'))
            return subprocess.CompletedProcess(list(args), int(status), stdout.read_text(errors='replace'),
                                               stderr.read_text(errors='replace'))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(timeout=60)


_zygote: Optional[_Zygote] = None
_lock = threading.Lock()


def run_python(args: Sequence[str], cwd: Path = ROOT, env: Optional[Mapping[str, str]] = None,
               timeout: Optional[float] = None, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """``subprocess.run(args, cwd=cwd, env=env, timeout=timeout, input=input, capture_output=True, text=True)``, as a
    fork of this worker's zygote where it can be (``env`` defaults to this process's environment)."""
    global _zygote
    env = dict(os.environ if env is None else env)
    with _lock:  # one command at a time per zygote (a test's threads wait their turn)
        if _zygote is None and env.get(FRESH_ENV, '') in ('', '0'):
            _zygote = _Zygote()
        if _zygote is not None and _zygote.accepts(args, env, input):
            return _zygote.run(args, cwd, env, timeout)
    return subprocess.run(list(args), cwd=cwd, env=env, timeout=timeout, input=input, capture_output=True, text=True)


if __name__ == '__main__':
    serve()
