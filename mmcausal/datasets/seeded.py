"""Per-sample seeded augmentation: a sample's random transforms are a pure function of (seed, rank, epoch,
position in the epoch).

Why: mmengine seeds each dataloader worker once (``worker_init_fn``) and the worker's ``random`` / numpy /
torch streams then run on through the whole training run (persistent workers keep them across epochs). A
resumed run starts fresh workers, so its augmentations differ from those of the uninterrupted run from the
resume point on, and they also depend on ``num_workers`` (which worker draws which sample). Here the sampler,
which lives in the main process, knows the epoch (``set_epoch``, restored on resume) and hands every index
out together with a seed derived from ``(seed, rank, epoch, position)``; the dataset wrapper runs that
sample's ``__getitem__`` (pipeline, and the re-draws after a ``None`` sample) under ``random``, numpy's
global and torch's CPU generator seeded with it. The position in the rank's stream (rather than the dataset
index) keys the seed so that an index drawn twice in one epoch (``InfiniteSampler``, repeated-augmentation
samplers) is augmented differently each time.

Both are put in place by :mod:`mmcausal.engine.runner.exact_resume_loops`; configs need not name them.
"""
import random
from contextlib import contextmanager
from typing import Iterator, Optional

import numpy as np
import torch
from mmengine.dist import get_dist_info, sync_random_seed
from torch.utils.data import Dataset, Sampler

from mmcausal.registry import DATA_SAMPLERS, DATASETS

SAMPLE_STREAM = 0  # first word of the spawn key of per-sample seeds (loops use another one)


def derive_seed(seed: int, *keys: int) -> int:
    """A 32-bit seed from ``seed`` and ``keys`` (numpy ``SeedSequence``: well mixed, no collisions by
    addition such as ``seed + epoch``)."""
    return int(np.random.SeedSequence(seed, spawn_key=tuple(keys)).generate_state(1)[0])


@contextmanager
def seeded_cpu_rngs(seed: int) -> Iterator[None]:
    """Run the block with ``random``, numpy's global and torch's CPU generator seeded with ``seed``, then put
    the caller's states back (so that ``num_workers=0`` leaves the main process's streams alone)."""
    states = random.getstate(), np.random.get_state(), torch.get_rng_state()
    random.seed(seed)
    np.random.seed(seed)
    torch.default_generator.manual_seed(seed)
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.set_rng_state(states[2])


class SeededIndex(int):
    """A dataset index that carries the seed of its sample (an ``int``, so batch samplers that inspect
    indices, e.g. mmdet's ``AspectRatioBatchSampler``, work unchanged)."""
    seed: int

    def __new__(cls, index: int, seed: int) -> 'SeededIndex':
        obj = super().__new__(cls, index)
        obj.seed = seed
        return obj

    def __reduce__(self):  # keep the seed when the index is sent to a worker process
        return SeededIndex, (int(self), self.seed)


@DATA_SAMPLERS.register_module()
class SeededSampler(Sampler):
    """Wrap any sampler; yield its indices as :class:`SeededIndex` with seed ``derive_seed(seed, 0, rank,
    epoch, position)``, ``position`` counting from 0 in every epoch (an infinite sampler is one epoch).

    Args:
        dataset: the (wrapped) dataset; given by the Runner.
        sampler: config of the real sampler (e.g. ``dict(type='DefaultSampler', shuffle=True)``).
        seed: the run's seed; given by the Runner (``None``: a random one, as mmengine's samplers do; the
            Runner passes ``None`` with ``randomness.diff_rank_seed=True``, and then neither this nor
            ``DefaultSampler``'s shuffling repeats on resume).
    """

    def __init__(self, dataset: Dataset, sampler: dict, seed: Optional[int] = None) -> None:
        self.dataset = dataset
        self.seed = sync_random_seed() if seed is None else seed
        self.sampler = DATA_SAMPLERS.build(sampler, default_args=dict(dataset=dataset, seed=self.seed))
        self.rank = get_dist_info()[0]
        self.epoch = 0

    def __iter__(self) -> Iterator[SeededIndex]:
        for position, index in enumerate(self.sampler):
            yield SeededIndex(index, derive_seed(self.seed, SAMPLE_STREAM, self.rank, self.epoch, position))

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)


@DATASETS.register_module()
class SeededDataset(Dataset):
    """Wrap any dataset; ``dataset[SeededIndex]`` is computed under that index's seed
    (:func:`seeded_cpu_rngs`), ``dataset[int]`` as usual. Every other attribute (``metainfo``,
    ``get_data_info``, ``full_init``, ...) is the wrapped dataset's.

    Args:
        dataset: config (or instance) of the real dataset.
    """

    def __init__(self, dataset) -> None:
        self.dataset = DATASETS.build(dataset) if isinstance(dataset, dict) else dataset

    def __getattr__(self, name: str):
        if name == 'dataset':  # not set yet (unpickling): avoid infinite recursion
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        if not isinstance(index, SeededIndex):
            return self.dataset[index]
        with seeded_cpu_rngs(index.seed):
            return self.dataset[int(index)]
