"""Test-suite set-up: make ``tests/reference`` importable (pytest runs in importlib mode, see pyproject)."""
import copy
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Without a GPU, Triton kernels run in Triton's interpreter on CPU tensors (the De-focus Triton scan's tests); it is
# chosen when triton is first imported, so before anything is: here, and so in the zygote and every tool it runs
if not Path('/dev/nvidiactl').exists():
    os.environ.setdefault('TRITON_INTERPRET', '1')

import pytest  # noqa: E402

import zygote  # noqa: E402  (first: it records the worker's environment before any test module is collected)


def _uses_module_fixture(item) -> bool:
    """Whether the test uses a module-scoped fixture of its own module (e.g. a shared training run)."""
    return any(defs[-1].scope == 'module' and defs[-1].baseid.endswith('.py')
               for defs in item._fixtureinfo.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook turns the groups into node-id suffixes
def pytest_collection_modifyitems(config, items) -> None:
    """Run the slow end-to-end tests first, then the other end-to-end ones, then the unit tests (stable order within
    each): with several xdist workers the short tests fill the gaps instead of one long run finishing alone. Tests
    that share a module-scoped fixture form one xdist group (``--dist loadgroup``), so it is built once; so do the
    tests of every module that use the session's trained judge (``generation_judge``)."""
    items.sort(key=lambda item: (item.get_closest_marker('slow') is None, item.get_closest_marker('e2e') is None))
    for item in items:
        if 'generation_judge' in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group('generation_judge'))
        elif _uses_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def pytest_configure(config) -> None:
    """Two shortcuts for the tests' in-process work (not the tools they run as zygote forks)."""
    _stop_dataloader_workers_promptly()
    _load_each_repository_config_once()


#: The index queues of every live multiprocessing DataLoader iterator of this process, by the iterator's id.
_LIVE_INDEX_QUEUES = {}


def _stop_dataloader_workers_promptly() -> None:
    """A finished in-process run's DataLoader workers stop at once, also when the garbage collector frees the run.

    mmengine's Runner sits in reference cycles (runner, loops, hooks), so the cyclic garbage collector frees its
    dataloader iterators, and it clears weak references before it calls ``__del__``: the finalizers of an iterator's
    index queues run first (their feeder threads stop), then the iterator's ``__del__`` asks its workers to exit
    through those queues, the request never leaves this process, and torch waits 5 s per worker before killing it:
    20 s for a twin's train and val loaders (2 workers each), wherever a collection happens to free a run (80 of the
    125 s of ``test_defocus_twin_resumes_bit_identically`` on its own, about 500 s of the in-process end-to-end tests).
    A reference to each live iterator's index queues from here, dropped once the iterator has shut its workers down,
    keeps the queues out of that garbage: the workers get the request and exit at once, as they do when an iterator
    is freed by its reference count. (Tools run as zygote forks leave through the interpreter's exit, which ends
    daemonic workers at once.)"""
    from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter as Iterator
    if getattr(Iterator, '_mmcausal_tests_keep_queues', False):
        return
    start, shut_down = Iterator.__init__, Iterator._shutdown_workers

    def __init__(self, loader) -> None:
        try:
            start(self, loader)
        finally:  # also when starting a worker failed: __del__ still shuts down those that started
            if hasattr(self, '_index_queues'):
                _LIVE_INDEX_QUEUES[id(self)] = self._index_queues

    def _shutdown_workers(self) -> None:
        try:
            shut_down(self)
        finally:
            if getattr(self, '_shutdown', False):
                _LIVE_INDEX_QUEUES.pop(id(self), None)

    Iterator.__init__, Iterator._shutdown_workers = __init__, _shutdown_workers
    Iterator._mmcausal_tests_keep_queues = True


CONFIGS = Path(__file__).resolve().parents[1] / 'configs'
#: The parsed configs of this repository, by ``Config.fromfile``'s arguments (and the working directory).
_PARSED_CONFIGS = {}


def _load_each_repository_config_once() -> None:
    """``Config.fromfile`` parses each config of ``configs/`` once per process, then hands out deep copies.

    Parsing a config and its bases takes about 0.2 s, and the tests parse the same ones hundreds of times (748 calls
    for 140 files in the unit tests, 119 of their 420 s, and more in the end-to-end tests and the in-process tools).
    A copy holds what a new parse gives (the same file name and text, independent values); the repository's configs
    do not change during a run, and read no environment variables. Other files (temporary configs, broken ones) and
    failed parses are not kept."""
    from mmengine.config import Config
    if getattr(Config, '_mmcausal_tests_parse_once', False):
        return
    parse = Config.fromfile

    def fromfile(filename, *args, **kwargs):
        path = Path(os.path.realpath(filename))
        if CONFIGS not in path.parents:
            return parse(filename, *args, **kwargs)
        key = (str(filename), os.getcwd(), args, tuple(sorted(kwargs.items())))
        if key not in _PARSED_CONFIGS:
            _PARSED_CONFIGS[key] = parse(filename, *args, **kwargs)
        return copy.deepcopy(_PARSED_CONFIGS[key])

    Config.fromfile = staticmethod(fromfile)
    Config._mmcausal_tests_parse_once = True


@pytest.fixture(autouse=True)
def _environment_is_restored_after_each_test():
    """Every test starts with the worker's start-up variables (``zygote.restore_start_up_environment``: also undoing
    what a module-scoped fixture or a library set), and what it sets in ``os.environ`` is undone afterwards: later
    tests see the environment the worker started with, and their tools still run as forks of the worker's zygote
    (``tests/zygote.py`` sends a command whose start-up variables differ from its own to a fresh interpreter)."""
    zygote.restore_start_up_environment()
    before = dict(os.environ)
    yield
    zygote.restore_environment(before)


def _make_shapes(root: Path, style: str, seed: int = 0, num_val_detection: int = 16) -> Path:
    """Write the shapes datasets (ImageNet/ADE20K/COCO layouts and the CIFAR-10 copy) of ``style``: their default
    sizes, except ``num_val_detection`` COCO validation images."""
    from mmcausal.datasets.shapes import make_ade20k_like, make_cifar_like, make_coco_like, make_imagenet_like
    make_imagenet_like(str(root / 'imagenet'), style=style, seed=seed)
    make_cifar_like(str(root / 'cifar10'), style=style, seed=seed)
    make_ade20k_like(str(root / 'ade20k'), style=style, seed=seed)
    make_coco_like(str(root / 'coco'), style=style, seed=seed, num_val=num_val_detection)
    return root


@pytest.fixture(scope='session')
def shapes_root(tmp_path_factory) -> Path:
    """The embedded datasets (style v1), generated once per test session."""
    return _make_shapes(tmp_path_factory.mktemp('shapes'), 'v1')


@pytest.fixture(scope='session')
def shapes_v3_root(tmp_path_factory) -> Path:
    """The independent third style (v3: either contrast polarity, any rotation, noise) of the three datasets, drawn
    with seed 3 (the recipes were tuned on seed 0 and other draws; only the Pyramid UperNet twin's length, checked on
    seed 0, the DINO twin's patch size and length, checked on seeds 0, 1, 2, and the detection twins' 32 sampled
    RoIs, measured here and on seed 0, were set after runs on this draw), and
    48 COCO validation images (about 100 objects: with the default 16 a bbox mAP moves by several hundredths between
    draws). Generated once per test session."""
    return _make_shapes(tmp_path_factory.mktemp('shapes_v3'), 'v3', seed=3, num_val_detection=48)


@pytest.fixture(scope='session')
def generation_judge(shapes_root, tmp_path_factory):
    """The image-generation twins' judge, trained once per session through tools/train.py on the real shapes images,
    with the 32 px train / val reference files (tests/judge_utils.py ``train_judge``; about a minute and a half)."""
    from judge_utils import train_judge
    return train_judge(shapes_root, tmp_path_factory.mktemp('judge'))


@pytest.fixture(scope='module')
def single_thread():
    """One intra-op thread for the tiny models: with two threads they run many times slower on a busy
    2-core machine."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
