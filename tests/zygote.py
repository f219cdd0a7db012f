"""Run the suite's ``python SCRIPT.py ...`` commands from a process that has imported the third-party stack already.

A fresh interpreter spends about 6 s of one core importing torch, mmengine and the three OpenMMLab model packages
(16 s without the bytecode that tools/setup_env.sh writes) before a tool does anything, and the suite runs about a
hundred tools (training runs, converters, samplers, the bad-input catalogue). :func:`run_python` runs such a command
as a fork of a *zygote*: one process per pytest worker that imports those packages (and never mmcausal or anything
of this repository) once. The fork then does what the interpreter does for ``python SCRIPT.py ARGS``: stdin from
``/dev/null`` and stdout / stderr into files, the command's working directory, environment and ``sys.argv``,
``sys.path[0]`` the script's folder, a fresh ``__main__`` module whose ``__file__`` is the script's absolute path,
fresh seeds for ``random``, NumPy and torch (a new interpreter draws new ones too); it imports mmcausal and the rest
itself, runs the script and leaves through the interpreter's normal exit (``atexit``, an uncaught exception printed
with status 1, ``SystemExit`` codes, a signal's negative status). The caller gets the ``CompletedProcess`` of
``subprocess.run``.

What a fork cannot reproduce runs in a fresh interpreter instead: other interpreter options (``-c``, ``-m``, stdin
input), an environment that differs from the zygote's in a variable read at start-up (:data:`START_UP_ENV`:
``PYTHON*``, ``OMP_NUM_THREADS``, ``HOME``, ``TORCHDYNAMO_DISABLE``, ...), and every command when
``MMCAUSAL_TEST_FRESH_PROCESSES=1`` is set (in the worker or the command). What stays different: the
third-party imports' warnings are printed once by the zygote, not by each command; all forks share the zygote's
string-hash seed; a traceback starts with this file's frame. If the zygote fails to start or stops answering, it is
killed, and the command and the worker's later ones run in fresh interpreters. Run as a script, this file is the
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
from typing import Callable, Mapping, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
FRESH_ENV = 'MMCAUSAL_TEST_FRESH_PROCESSES'
#: Environment variables (prefixes) that the interpreter, the BLAS / OpenMP runtimes or torch read when they start: a
#: command whose value differs from the zygote's runs in a fresh interpreter. Others are read when used, so a fork
#: sees them as a fresh process would (the worker's own environment drifts: in-process tests set ``RANK``,
#: ``CUBLAS_WORKSPACE_CONFIG``, ...).
START_UP_ENV = ('PYTHON', 'OMP_', 'MKL_', 'KMP_', 'OPENBLAS_', 'GOTO_', 'TORCH', 'PYTORCH_', 'TRITON_', 'LD_',
                'CUDA_', 'HOME', 'LANG', 'LC_', 'TMPDIR', 'PATH')
#: What the zygote imports: the third-party packages every tool of ours loads (never mmcausal).
PRELOAD = ('numpy', 'PIL.Image', 'torch', 'torchvision', 'mmengine.runner', 'mmengine.model', 'mmcv.ops',
           'mmpretrain.models', 'mmpretrain.datasets', 'mmpretrain.evaluation', 'mmseg.models', 'mmseg.datasets',
           'mmseg.evaluation', 'mmdet.models', 'mmdet.datasets', 'mmdet.evaluation')
#: This process's environment when this module was first imported: tests/conftest.py imports it before any test
#: module is collected, so before a library import (cv2 sets ``LD_LIBRARY_PATH``) or a fixture has changed it.
_START_ENV = dict(os.environ)


def _is_start_up_variable(key: str) -> bool:
    return key.startswith(START_UP_ENV)


def _restore(saved: Mapping[str, str], selected: Callable[[str], bool]) -> None:
    """Give the ``selected`` variables of ``os.environ`` their values in ``saved`` (unset those it lacks)."""
    for key in [key for key in os.environ if selected(key) and key not in saved]:
        del os.environ[key]
    for key, value in saved.items():
        if selected(key) and os.environ.get(key) != value:
            os.environ[key] = value


def restore_environment(saved: Mapping[str, str]) -> None:
    """Make ``os.environ`` equal to ``saved`` (a copy taken earlier)."""
    _restore(saved, lambda key: True)


def restore_start_up_environment() -> None:
    """Set this process's start-up variables (:data:`START_UP_ENV`) back to their values when the worker started.

    What the worker's own code sets in them (cv2's ``LD_LIBRARY_PATH``, inductor's ``TORCHINDUCTOR_CACHE_DIR``,
    mmengine's ``MKL_NUM_THREADS`` in a distributed set-up, also inside a module-scoped fixture) is not what a test
    asks of its commands, but would send every later command of the worker to a fresh interpreter."""
    _restore(_START_ENV, _is_start_up_variable)


# ------------------------------------------------------------------------------------------------ the zygote


def _run_forked(request: dict) -> None:
    """In the fork: become ``python SCRIPT ARGS`` of ``request`` and exit with its status (never returns)."""
    import builtins
    import random
    import types

    import numpy as np
    import torch

    signal.signal(signal.SIGINT, signal.default_int_handler)  # the zygote ignores it, a script does not
    os.setsid()  # its own process group: a timeout kills the command with its data-loader workers
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request['stdout'], os.O_WRONLY | os.O_CREAT),
                            (2, request['stderr'], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request['cwd'])
    os.environ.clear()
    os.environ.update(request['env'])
    random.seed()
    np.random.seed()
    torch.seed()
    script = request['argv'][1]
    sys.argv = list(request['argv'][1:])
    path = os.path.abspath(script)
    sys.path[0] = os.path.dirname(path)
    main = types.ModuleType('__main__')
    main.__dict__.update(__file__=path, __builtins__=builtins, __cached__=None, __spec__=None, __package__=None)
    sys.modules['__main__'] = main
    with open(path, 'rb') as source:
        code = compile(source.read(), path, 'exec')
    exec(code, main.__dict__)  # an exception propagates: the interpreter prints it and exits with status 1
    sys.exit(0)


def serve() -> None:
    """The zygote: import :data:`PRELOAD`, then for each request line on stdin fork a command and reply with its
    pid, then its exit status (negative: killed by that signal), one line each."""
    import importlib
    replies = os.fdopen(os.dup(1), 'wb', buffering=0)
    os.dup2(2, 1)  # what the imports print must not reach the replies
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C of the test run: the worker closes the zygote
    for module in PRELOAD:
        importlib.import_module(module)
    replies.write(b'ready\n')
    for line in sys.stdin.buffer:
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


class ZygoteFailure(RuntimeError):
    """The zygote did not start or stopped answering."""


class _Zygote:
    """This worker's zygote process and the protocol with it (one command at a time)."""

    def __init__(self) -> None:
        # the start-up variables of the worker's start (not those of the test that happens to start the zygote)
        self.env = {**{key: value for key, value in os.environ.items() if not _is_start_up_variable(key)},
                    **{key: value for key, value in _START_ENV.items() if _is_start_up_variable(key)}}
        self.running: Optional[int] = None  # the pid (= process group) of the command in flight
        self.process = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        cwd=ROOT, env=self.env, bufsize=0)
        if self._read_line(timeout=300) != 'ready':
            self.close()
            raise ZygoteFailure('the zygote did not start in 300 s')

    def _read_line(self, timeout: Optional[float]) -> Optional[str]:
        """The next reply line, or ``None`` after ``timeout`` seconds."""
        line = b''
        while not line.endswith(b'\n'):
            if not select.select([self.process.stdout], [], [], timeout)[0]:
                return None
            byte = self.process.stdout.read(1)
            if not byte:
                raise ZygoteFailure(f'the zygote exited (status {self.process.wait()})')
            line += byte
        return line.decode().strip()

    def accepts(self, args: Sequence[str], cwd: Path, env: Mapping[str, str], input: Optional[str]) -> bool:
        """Whether a fork can run ``args`` in ``env`` as a fresh interpreter would (see the module docstring)."""
        changed = {key for key in {*env, *self.env} if env.get(key) != self.env.get(key)}
        return (len(args) > 1 and args[0] == sys.executable and str(args[1]).endswith('.py') and input is None
                and Path(cwd).is_dir() and env.get(FRESH_ENV, '') in ('', '0')
                and not any(_is_start_up_variable(key) for key in changed))

    def run(self, args: Sequence[str], cwd: Path, env: Mapping[str, str],
            timeout: Optional[float]) -> subprocess.CompletedProcess:
        """Run ``args`` as a fork; on a timeout kill its process group and raise ``subprocess.TimeoutExpired``.
        Anything else going wrong (the zygote dies, the replies go out of step, an interrupt) kills the command and
        the zygote and raises."""
        with tempfile.TemporaryDirectory(prefix='zygote-') as folder:
            stdout, stderr = Path(folder) / 'stdout', Path(folder) / 'stderr'
            request = dict(argv=[str(arg) for arg in args], cwd=str(cwd), env=dict(env), stdout=str(stdout),
                           stderr=str(stderr))
            try:
                self.process.stdin.write((json.dumps(request) + '\n').encode())
                pid = self._read_line(timeout=60)
                if pid is None or int(pid) <= 1:
                    raise ZygoteFailure(f'the zygote answered {pid!r} instead of a pid')
                self.running = int(pid)
                status = self._read_line(timeout)
                if status is None:
                    self._kill_running()
                    if self._read_line(timeout=60) is None:
                        raise ZygoteFailure('the zygote did not reap a killed command')
                    self.running = None
                    raise subprocess.TimeoutExpired(list(args), timeout, stdout.read_text(errors='replace'),
                                                    stderr.read_text(errors='replace'))
                self.running = None
            except subprocess.TimeoutExpired:
                raise
            except BaseException:
                self.close()
                raise
            return subprocess.CompletedProcess(list(args), int(status), stdout.read_text(), stderr.read_text())

    def _kill_running(self) -> None:
        if self.running is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.running, signal.SIGKILL)

    def close(self) -> None:
        """Kill the command in flight (if any) and end the zygote."""
        self._kill_running()
        self.running = None
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


_zygote: Optional[_Zygote] = None
_zygote_failed = False
_lock = threading.Lock()


def _this_workers_zygote() -> Optional[_Zygote]:
    """The zygote, started on first use; ``None`` once it has failed (or with ``MMCAUSAL_TEST_FRESH_PROCESSES``)."""
    global _zygote, _zygote_failed
    if _zygote is None and not _zygote_failed and os.environ.get(FRESH_ENV, '') in ('', '0'):
        try:
            _zygote = _Zygote()
        except ZygoteFailure:
            _zygote_failed = True
        else:
            atexit.register(_zygote.close)
    if _zygote is not None and _zygote.process.poll() is not None:
        _zygote, _zygote_failed = None, True
    return _zygote


def run_python(args: Sequence[str], cwd: Path = ROOT, env: Optional[Mapping[str, str]] = None,
               timeout: Optional[float] = None, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """``subprocess.run(args, cwd=cwd, env=env, timeout=timeout, input=input, capture_output=True, text=True)``, as a
    fork of this worker's zygote where it can be (``env`` defaults to this process's environment). A thread waits
    for another's command to end (one zygote, one command at a time) before its own ``timeout`` starts."""
    global _zygote, _zygote_failed
    env = dict(os.environ if env is None else env)
    with _lock:
        zygote = _this_workers_zygote()
        if zygote is not None and zygote.accepts(args, cwd, env, input):
            try:
                return zygote.run(args, cwd, env, timeout)
            except ZygoteFailure as failure:  # the command runs again, in a fresh interpreter
                print(f'tests/zygote.py: {failure}; fresh interpreters from now on', file=sys.stderr)
                _zygote, _zygote_failed = None, True
    return subprocess.run(list(args), cwd=cwd, env=env, timeout=timeout, input=input, capture_output=True, text=True)


if __name__ == '__main__':
    serve()
