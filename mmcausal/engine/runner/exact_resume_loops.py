"""Training loops whose resumed runs are bit-identical to uninterrupted ones, with the real data pipeline.

mmengine 0.10.7 restores weights, optimizer, schedulers, the message hub, the sampler's seed and epoch, and
(``IterBasedTrainLoop``) replays the already-trained batches. Three things still make a resumed run diverge:

1. Augmentation randomness lives in the dataloader workers' RNG streams, which start over in a resumed run
   (persistent workers carry them across epochs). Fixed by per-sample seeds
   (:mod:`mmcausal.datasets.seeded`): both loops wrap ``train_dataloader`` in ``SeededSampler`` /
   ``SeededDataset``, so configs keep their ``dataset``/``sampler`` keys (``--cfg-options
   train_dataloader.dataset.data_root=...`` still works).
2. Model-side randomness (drop path, dropout, Mixup/CutMix, mmdet's RoI samplers) draws from the main
   process's global RNGs, which a resumed run re-seeds at start-up, and which the dataloader's iterator
   creation and validation also consume. Handled by seeding ``random``, numpy, torch (CPU and accelerators) from
   ``(runner.seed, iteration)`` before every training iteration.
3. ``EpochBasedTrainLoop`` resumed from a mid-epoch checkpoint (``CheckpointHook(by_epoch=False)``) trains
   the whole epoch again. Handled by skipping the batches of that epoch that were trained before the
   checkpoint (they are still loaded, as ``IterBasedTrainLoop`` does, so every batch sampler works).
"""
import copy
from typing import Sequence

from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop, IterBasedTrainLoop
from mmengine.runner.utils import set_random_seed

from mmcausal.datasets.seeded import SeededDataset, SeededSampler, derive_seed
from mmcausal.registry import LOOPS
from mmcausal.utils.errors import UserInputError

ITERATION_STREAM = 1  # first word of the spawn key of per-iteration seeds (samples use 0)


def seeded_dataloader_cfg(dataloader: dict) -> dict:
    """A copy of a ``train_dataloader`` config whose dataset and sampler are wrapped in ``SeededDataset`` /
    ``SeededSampler``."""
    if not isinstance(dataloader, dict):
        raise UserInputError(
            f'The exact-resume train loops build train_dataloader themselves and need its config (a dict), '
            f'got a built {type(dataloader).__name__}. Pass the dataloader as a config, or use '
            "train_cfg=dict(type='EpochBasedTrainLoop'/'IterBasedTrainLoop', ...).")
    cfg = copy.deepcopy(dataloader)
    dataset = cfg['dataset']
    if not (isinstance(dataset, dict) and dataset.get('type') in (SeededDataset, 'SeededDataset')):
        cfg['dataset'] = dict(type=SeededDataset, dataset=cfg['dataset'])
        cfg['sampler'] = dict(type=SeededSampler, sampler=cfg['sampler'])
    return cfg


def seed_iteration(seed: int, iteration: int) -> None:
    """Seed the main process's global RNGs for training iteration ``iteration`` of a run seeded ``seed``."""
    set_random_seed(derive_seed(seed, ITERATION_STREAM, iteration))


@LOOPS.register_module()
class ExactResumeEpochBasedTrainLoop(EpochBasedTrainLoop):
    """``EpochBasedTrainLoop`` with seeded augmentation and iterations, resumable mid-epoch (module doc)."""

    def __init__(self, runner, dataloader: dict, *args, **kwargs) -> None:
        super().__init__(runner, seeded_dataloader_cfg(dataloader), *args, **kwargs)
        self._trained_in_epoch = 0

    def run(self):
        self._trained_in_epoch = self._iter - self._epoch * len(self.dataloader)
        if self._trained_in_epoch > 0:
            print_log(f'Resumed in the middle of epoch {self._epoch + 1}: skipping its first '
                      f'{self._trained_in_epoch} batches, trained before the checkpoint', logger='current')
        return super().run()

    def run_epoch(self) -> None:
        super().run_epoch()
        self._trained_in_epoch = 0

    def run_iter(self, idx: int, data_batch: Sequence[dict]) -> None:
        if idx < self._trained_in_epoch:
            return
        seed_iteration(self.runner.seed, self._iter)
        super().run_iter(idx, data_batch)


@LOOPS.register_module()
class ExactResumeIterBasedTrainLoop(IterBasedTrainLoop):
    """``IterBasedTrainLoop`` with seeded augmentation and iterations (module doc)."""

    def __init__(self, runner, dataloader: dict, *args, **kwargs) -> None:
        super().__init__(runner, seeded_dataloader_cfg(dataloader), *args, **kwargs)

    def run_iter(self, data_batch: Sequence[dict]) -> None:
        seed_iteration(self.runner.seed, self._iter)
        super().run_iter(data_batch)
