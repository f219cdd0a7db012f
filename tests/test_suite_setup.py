"""The suite's own set-up works: under ``--dist loadgroup`` (tools/run_tests.sh) the tests that share a
module-scoped fixture carry their xdist group, so one worker builds the fixture once (tests/conftest.py); a command
run from the zygote (tests/zygote.py) behaves as in a fresh interpreter."""
import json
import os
import subprocess
import sys
import time

import pytest

from zygote import run_python

#: Reports what a fresh interpreter sets up for a script, then ends as its first argument says.
PROBE = """import json, os, random, sys
import numpy as np
import torch
report = dict(argv=sys.argv, cwd=os.getcwd(), path0=sys.path[0], name=__name__, file=__file__, stdin=sys.stdin.read(),
              env=os.environ.get('PROBE_VALUE'), threads=torch.get_num_threads(), mmcausal='mmcausal' in sys.modules,
              draws=[random.random(), float(np.random.rand()), torch.rand(()).item()])
print(json.dumps(report))
print('to stderr', file=sys.stderr)
end = sys.argv[1]
if end == 'exit-3':
    sys.exit(3)
if end == 'raise':
    raise ValueError('raised by the probe')
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


@pytest.mark.parametrize('end,status', [('return', 0), ('exit-3', 3), ('raise', 1)])
def test_a_zygote_command_sees_what_a_fresh_interpreter_sees(tmp_path, end, status):
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    env = {**os.environ, 'PROBE_VALUE': 'x', 'OMP_NUM_THREADS': '2'}
    forked = [run_python([sys.executable, str(script), end], cwd=tmp_path, env=env) for _ in range(2)]
    fresh = subprocess.run([sys.executable, str(script), end], cwd=tmp_path, env=env, capture_output=True, text=True)
    for result in (*forked, fresh):
        assert result.returncode == status, result.stderr
        report = json.loads(result.stdout.splitlines()[0])
        assert report['argv'] == [str(script), end] and report['cwd'] == str(tmp_path)
        assert report['path0'] == str(tmp_path) and report['name'] == '__main__' and report['file'] == str(script)
        assert report['stdin'] == '' and report['env'] == 'x' and report['threads'] == 2
        assert not report['mmcausal']  # the zygote never imports mmcausal: each command imports it itself
        assert result.stderr.startswith('to stderr\n')
    assert ('ValueError: raised by the probe' in forked[0].stderr) == (end == 'raise')
    first, second = (json.loads(result.stdout.splitlines()[0])['draws'] for result in forked)
    assert all(a != b for a, b in zip(first, second))  # fresh seeds for random, NumPy and torch in every command


def test_a_zygote_command_past_its_timeout_is_killed(tmp_path):
    script = tmp_path / 'probe.py'
    script.write_text(PROBE)
    start = time.time()
    with pytest.raises(subprocess.TimeoutExpired):
        run_python([sys.executable, str(script), 'sleep'], cwd=tmp_path, timeout=5)
    assert time.time() - start < 60
    assert run_python([sys.executable, str(script), 'return'], cwd=tmp_path).returncode == 0  # the zygote serves on
