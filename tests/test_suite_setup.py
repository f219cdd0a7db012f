"""The suite's own set-up works: under ``--dist loadgroup`` (tools/run_tests.sh) the tests that share a
module-scoped fixture carry their xdist group, so one worker builds the fixture once (tests/conftest.py); a command
run from the zygote (tests/zygote.py) behaves as in a fresh interpreter."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import zygote
from zygote import run_python

#: Reports what a fresh interpreter sets up for a script, then ends as its first argument says.
PROBE = """import json, os, random, signal, sys
import numpy as np
import torch
report = dict(argv=sys.argv, cwd=os.getcwd(), path0=sys.path[0], name=__name__, file=__file__, stdin=sys.stdin.read(),
              env=os.environ.get('MMCAUSAL_PROBE_VALUE'), threads=torch.get_num_threads(), parent=os.getppid(),
              mmcausal='mmcausal' in sys.modules,
              draws=[random.random(), float(np.random.rand()), torch.rand(()).item()])
print(json.dumps(report))
print('to stderr', file=sys.stderr)
end = sys.argv[1]
if end == 'exit-3':
    sys.exit(3)
if end == 'raise':
    raise ValueError('raised by the probe')
if end == 'terminated':
    os.kill(os.getpid(), signal.SIGTERM)
if end == 'sleep':
    import time
    time.sleep(120)
"""


@pytest.fixture(scope='module')
def shared_run() -> str:
    """Stands for a shared training run: a module-scoped fixture of this module."""
    return 'built once'


def test_tests_sharing_a_module_fixture_are_grouped_on_one_worker(shared_run, request):
    if not getattr(request.config.option, 'loadgroup', False):  # set in pytest-xdist's workers
        pytest.skip('only under pytest-xdist --dist loadgroup')
    assert request.node.nodeid.endswith(f'@{request.module.__name__}'), (
        f'{request.node.nodeid} carries no xdist group: this pytest / pytest-xdist pair cannot group tests '
        '(see requirements/tests.txt)')


def _probe(tmp_path, end, fresh=False, **env):
    """The probe in the zygote's environment (the worker's own may have drifted, which sends a command whose start-up
    variables differ to a fresh interpreter) with ``env`` added."""
    server = zygote._this_workers_zygote()
    if server is None:
        pytest.skip('no zygote: MMCAUSAL_TEST_FRESH_PROCESSES is set, or it failed to start')
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    env = {**server.env, 'MMCAUSAL_PROBE_VALUE': 'x', **env}
    if fresh:
        return subprocess.run([sys.executable, 'probe.py', end], cwd=tmp_path, env=env, capture_output=True, text=True)
    return run_python([sys.executable, 'probe.py', end], cwd=tmp_path, env=env)


@pytest.fixture(scope='module')
def drifted_start_up_variable():
    """What mmengine does in a module-scoped distributed set-up (``MKL_NUM_THREADS``): a start-up variable set in the
    worker by its own code, never unset."""
    os.environ['MKL_MMCAUSAL_PROBE_DRIFT'] = '1'
    yield 'MKL_MMCAUSAL_PROBE_DRIFT'
    os.environ.pop('MKL_MMCAUSAL_PROBE_DRIFT', None)


def test_a_start_up_variable_the_worker_set_is_undone_and_commands_still_fork(tmp_path, drifted_start_up_variable):
    server = zygote._this_workers_zygote()
    if server is None:
        pytest.skip('no zygote: MMCAUSAL_TEST_FRESH_PROCESSES is set, or it failed to start')
    assert drifted_start_up_variable not in os.environ  # conftest's fixture ran after the module fixture
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    result = run_python([sys.executable, 'probe.py', 'return'], cwd=tmp_path)  # the worker's own environment
    assert json.loads(result.stdout.splitlines()[0])['parent'] == zygote._zygote.process.pid, result.stderr


@pytest.mark.e2e  # a fresh interpreter each: about 5 s
@pytest.mark.parametrize('end,status', [('return', 0), ('exit-3', 3), ('raise', 1), ('terminated', -15)])
def test_a_zygote_command_sees_what_a_fresh_interpreter_sees(tmp_path, end, status):
    # RANK: what in-process tests leave in a worker's environment, read when used, so it does not force a fresh run
    forked = [_probe(tmp_path, end, RANK='0') for _ in range(2)]
    fresh = _probe(tmp_path, end, fresh=True, RANK='0')
    reports = [json.loads(result.stdout.splitlines()[0]) for result in (*forked, fresh)]
    assert reports[0]['parent'] == reports[1]['parent'] == zygote._zygote.process.pid  # forks, of the zygote
    assert reports[2]['parent'] == os.getpid()
    for result, report in zip((*forked, fresh), reports):
        assert result.returncode == status, result.stderr
        assert report['argv'] == ['probe.py', end] and report['cwd'] == str(tmp_path)
        assert report['path0'] == str(tmp_path) and report['name'] == '__main__'
        assert report['file'] == str(tmp_path / 'probe.py')
        assert report['stdin'] == '' and report['env'] == 'x' and report['threads'] == reports[2]['threads']
        assert not report['mmcausal']  # the zygote never imports mmcausal: each command imports it itself
        assert result.stderr.startswith('to stderr\n')
        assert ('ValueError: raised by the probe' in result.stderr) == (end == 'raise')
    assert all(a != b for a, b in zip(reports[0]['draws'], reports[1]['draws']))  # fresh seeds in every command


def test_commands_a_fork_cannot_reproduce_run_in_a_fresh_interpreter(tmp_path):
    for env in (dict(TORCHDYNAMO_DISABLE='1'), dict(MMCAUSAL_TEST_FRESH_PROCESSES='1')):  # read at start-up / asked
        result = _probe(tmp_path, 'return', **env)
        assert result.returncode == 0 and json.loads(result.stdout.splitlines()[0])['parent'] == os.getpid()


def test_a_zygote_command_past_its_timeout_is_killed(tmp_path):
    (tmp_path / 'probe.py').write_text(PROBE)
    start = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        run_python([sys.executable, 'probe.py', 'sleep'], cwd=tmp_path, timeout=1)
    assert time.time() - start < 60
    assert _probe(tmp_path, 'return').returncode == 0  # the zygote serves on


def test_the_set_up_wrote_the_bytecode_of_the_installed_stack():
    """tools/setup_env.sh compiles site-packages once: where PYTHONDONTWRITEBYTECODE is set nothing else writes the
    .pyc files, and every new interpreter (each tool the suite runs fresh) would compile torch and OpenMMLab again."""
    import importlib.util

    import mmdet.models
    import mmengine.runner
    import torch
    for module in (torch, torch.nn.functional, mmengine.runner, mmdet.models):
        bytecode = Path(importlib.util.cache_from_source(module.__file__))
        assert bytecode.is_file(), f'{bytecode} is missing: run bash tools/setup_env.sh'
