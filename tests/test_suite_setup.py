"""The suite's own set-up works: under ``--dist loadgroup`` (tools/run_tests.sh) the tests that share a
module-scoped fixture carry their xdist group, so one worker builds the fixture once (tests/conftest.py)."""
import pytest


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
