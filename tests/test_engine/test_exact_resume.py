"""A run interrupted and resumed ends exactly like an uninterrupted run (weights, optimizer and soft-mask
schedule), with the twin configs as shipped: their random augmentation pipelines and dataloader workers
(persistent where the config says so). Resumed from an epoch-boundary checkpoint and from a mid-epoch
(mid-run) one, for a classification, a segmentation and a detection twin. Plus fast unit tests of the
per-sample seeding that makes it possible."""
import gc
import random
import shutil
from pathlib import Path
from typing import List, Tuple

import numpy as np
import pytest
import torch
from mmengine.hooks import Hook
from mmengine.runner import Runner
from torch.utils.data import DataLoader, Dataset

from e2e_utils import InterruptAt, Interrupted, load_config
from mmcausal.datasets import SeededDataset, SeededSampler
from mmcausal.engine.runner import seeded_dataloader_cfg

RANDOM_TRANSFORMS = {'RandomResizedCrop', 'RandomFlip', 'RandomCrop', 'RandomResize', 'RandomChoiceResize'}


# ----------------------------------------------------------------------------------------------- unit tests


class RandomDraws(Dataset):
    """Item ``i``: ``i`` and one draw from each global RNG an augmentation pipeline may use."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> Tuple[int, float, float, float]:
        return int(index), random.random(), float(np.random.rand()), float(torch.rand(()))


def _seeded(seed: int = 0) -> Tuple[SeededDataset, SeededSampler]:
    dataset = SeededDataset(RandomDraws())
    return dataset, SeededSampler(dataset, dict(type='DefaultSampler', shuffle=True), seed=seed)


def _load_epoch(epoch: int, num_workers: int, seed: int = 0) -> List[tuple]:
    dataset, sampler = _seeded(seed)
    sampler.set_epoch(epoch)
    loader = DataLoader(dataset, batch_size=5, sampler=sampler, num_workers=num_workers, collate_fn=list)
    return [item for batch in loader for item in batch]


def test_sample_is_a_function_of_seed_epoch_and_position_not_of_workers():
    in_process = _load_epoch(epoch=3, num_workers=0)
    assert _load_epoch(epoch=3, num_workers=2) == in_process  # workers have their own (different) RNG streams
    assert sorted(item[0] for item in in_process) == list(range(12))

    dataset, sampler = _seeded()
    sampler.set_epoch(3)
    backwards = [dataset[index] for index in reversed(list(sampler))]  # any order of processing
    assert backwards[::-1] == in_process

    draws = {item[0]: item[1:] for item in in_process}
    assert len(set(draws.values())) == 12  # no two samples of an epoch share their draws
    for other in (_load_epoch(epoch=4, num_workers=0), _load_epoch(epoch=3, num_workers=0, seed=1)):
        other_draws = {item[0]: item[1:] for item in other}
        assert all(draws[index] != other_draws[index] for index in draws)  # new epoch or seed: new augmentation


def test_seeding_leaves_the_callers_rngs_alone():
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    expected = random.random(), np.random.rand(), torch.rand(())
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    dataset, sampler = _seeded()
    [dataset[index] for index in sampler]  # samples drawn in this process
    assert (random.random(), np.random.rand(), torch.rand(())) == expected


def test_plain_indices_are_not_reseeded():
    dataset, _ = _seeded()
    torch.manual_seed(0)
    first = dataset[2]
    assert dataset[2][1:] != first[1:]


def test_loop_wraps_the_dataloader_config_once_and_keeps_its_keys():
    loader = dict(batch_size=4, sampler=dict(type='DefaultSampler', shuffle=True),
                  dataset=dict(type='ImageNet', data_root='data/x', pipeline=[]))
    wrapped = seeded_dataloader_cfg(loader)
    assert wrapped['dataset'] == dict(type=SeededDataset, dataset=loader['dataset'])
    assert wrapped['sampler'] == dict(type=SeededSampler, sampler=loader['sampler'])
    assert wrapped['batch_size'] == 4 and loader['dataset']['type'] == 'ImageNet'  # the input is not changed
    assert seeded_dataloader_cfg(wrapped) == wrapped


# ----------------------------------------------------------------------------------------- end-to-end tests


class RecordSoftMaskRate(Hook):
    priority = 'LOW'  # after SoftMaskHook (NORMAL) has set the rate

    def __init__(self) -> None:
        self.rates = {}

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.rates[runner.iter] = runner.model.backbone.soft_mask_rate


def _run(cfg, *hooks: Hook) -> Runner:
    runner = Runner.from_cfg(cfg)
    for hook in hooks:
        runner.register_hook(hook)
    runner.train()
    return runner


def _interrupt(cfg, mid_checkpoint: int, crash_at: int) -> Path:
    """Train with an extra iteration checkpoint at ``mid_checkpoint`` and crash before ``crash_at``."""
    cfg.custom_hooks = list(cfg.get('custom_hooks') or []) + [
        dict(type='CheckpointHook', by_epoch=False, interval=mid_checkpoint, max_keep_ckpts=-1, save_last=False)]
    with pytest.raises(Interrupted):
        _run(cfg, InterruptAt(crash_at))
    gc.collect()  # let the crashed run's dataloader workers go
    return Path(cfg.work_dir)


@pytest.fixture(autouse=True)
def fresh_home(tmp_path, monkeypatch) -> None:
    """Every run sees an empty HOME: resuming must not depend on any state outside the checkpoint."""
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))


def _resume(cfg, checkpoint: Path, *hooks: Hook) -> Runner:
    """Resume from a copy of ``checkpoint`` in a new work dir, as a job requeued in a fresh container does."""
    work_dir = Path(cfg.work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    copied = work_dir / checkpoint.name
    shutil.copy(checkpoint, copied)
    cfg.resume, cfg.load_from = True, str(copied)
    return _run(cfg, *hooks)


def _assert_shipped_pipeline(cfg) -> None:
    """The test must exercise real augmentation and dataloader workers, not a deterministic stand-in."""
    dataset = cfg.train_dataloader.dataset
    assert RANDOM_TRANSFORMS & {t['type'] for t in dataset.pipeline}
    assert cfg.train_dataloader.num_workers > 0


def _assert_bit_identical(resumed: Runner, reference: Runner, label: str) -> None:
    assert resumed.iter == reference.iter, label
    reference_state = reference.model.state_dict()
    for name, value in resumed.model.state_dict().items():
        torch.testing.assert_close(value, reference_state[name], rtol=0, atol=0, msg=f'{label}: {name}')


CLS_EPOCHS = 2
CLS_ITERS_PER_EPOCH = 13  # 400 training images / batch 32


def _two_epoch_config(config: str, shapes_root: Path, work_dir: Path, **options):
    """A classification twin as shipped, shortened to 2 epochs (1 warm-up) with a checkpoint every epoch."""
    return load_config(
        config, shapes_root, work_dir,
        **{
            'train_cfg.max_epochs': CLS_EPOCHS,
            'train_cfg.val_interval': 1,  # validation between epochs must not disturb training either
            'param_scheduler.0.end': 1,  # warm-up epochs
            'param_scheduler.1.begin': 1,
            'param_scheduler.1.end': CLS_EPOCHS,
            'default_hooks.checkpoint.interval': 1,
            'default_hooks.checkpoint.max_keep_ckpts': -1,
            **options,
        })


def _cls_config(shapes_root: Path, work_dir: Path):
    return _two_epoch_config('illama/illama-nano-p8_1xb32-30e_shapes-64px.py', shapes_root, work_dir,
                             custom_hooks=[dict(type='SoftMaskHook', schedule='linear', cutoff=2, start=1.0)])


@pytest.mark.e2e
def test_cls_twin_resumes_bit_identically(shapes_root, tmp_path):
    cfg = _cls_config(shapes_root, tmp_path / 'reference')
    _assert_shipped_pipeline(cfg)
    assert cfg.train_dataloader.persistent_workers
    reference_rates = RecordSoftMaskRate()
    reference = _run(cfg, reference_rates)
    assert reference.iter == CLS_EPOCHS * CLS_ITERS_PER_EPOCH

    mid = CLS_ITERS_PER_EPOCH + 6  # inside the second epoch
    work_dir = _interrupt(_cls_config(shapes_root, tmp_path / 'crashed'), mid, crash_at=mid + 3)
    for checkpoint, start in ((work_dir / 'epoch_1.pth', CLS_ITERS_PER_EPOCH), (work_dir / f'iter_{mid}.pth', mid)):
        rates = RecordSoftMaskRate()
        resumed = _resume(_cls_config(shapes_root, tmp_path / checkpoint.stem), checkpoint, rates)
        assert min(rates.rates) == start  # it continued, it did not start over
        assert 0 < reference_rates.rates[start] < 1  # the resume point fell inside the soft phase
        for it, rate in rates.rates.items():
            assert rate == reference_rates.rates[it]
        _assert_bit_identical(resumed, reference, checkpoint.name)


class RecordDropPathRate(Hook):
    priority = 'LOW'  # after DropPathScheduleHook (NORMAL) has set the rate

    def __init__(self) -> None:
        self.rates = {}

    def before_train_iter(self, runner, batch_idx, data_batch=None):
        self.rates[runner.iter] = runner.model.backbone.drop_path_rate


def _defocus_config(shapes_root: Path, work_dir: Path):
    """The De-focus twin (EMA, scheduled drop path, aux loss), 2 epochs, with the full-size recipes' repeated-
    augmentation sampler (the twin itself samples every image once per epoch), whose state must resume too."""
    return _two_epoch_config('defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py', shapes_root, work_dir,
                             **{'train_dataloader.sampler': dict(type='RepeatAugSampler', num_repeats=3,
                                                                 shuffle=True)})


@pytest.mark.e2e
def test_defocus_twin_resumes_bit_identically(shapes_root, tmp_path):
    cfg = _defocus_config(shapes_root, tmp_path / 'reference')
    _assert_shipped_pipeline(cfg)
    assert cfg.train_dataloader.sampler.type == 'RepeatAugSampler'
    assert {hook['type'] for hook in cfg.custom_hooks} == {'DropPathScheduleHook', 'EMAHook'}
    reference_rates = RecordDropPathRate()
    reference = _run(cfg, reference_rates)
    assert reference.iter == CLS_EPOCHS * CLS_ITERS_PER_EPOCH
    mid = CLS_ITERS_PER_EPOCH + 6
    work_dir = _interrupt(_defocus_config(shapes_root, tmp_path / 'crashed'), mid, crash_at=mid + 3)
    for checkpoint in (work_dir / 'epoch_1.pth', work_dir / f'iter_{mid}.pth'):
        rates = RecordDropPathRate()
        resumed = _resume(_defocus_config(shapes_root, tmp_path / checkpoint.stem), checkpoint, rates)
        assert rates.rates == {it: rate for it, rate in reference_rates.rates.items() if it in rates.rates}
        assert set(rates.rates.values()) == {0.2}  # the last of 2 epochs: the schedule's end
        _assert_bit_identical(resumed, reference, checkpoint.name)
        resumed_ema = resumed.hooks[[type(h).__name__ for h in resumed.hooks].index('EMAHook')].ema_model
        reference_ema = reference.hooks[[type(h).__name__ for h in reference.hooks].index('EMAHook')].ema_model
        for name, value in resumed_ema.state_dict().items():
            torch.testing.assert_close(value, reference_ema.state_dict()[name], rtol=0, atol=0, msg=name)


SEG_ITERS = 24  # the InfiniteSampler's first pass is 128 images / batch 8 = 16 iterations


def _seg_config(shapes_root: Path, work_dir: Path):
    return load_config(
        'illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py', shapes_root, work_dir,
        **{
            'train_cfg.max_iters': SEG_ITERS,
            'train_cfg.val_interval': SEG_ITERS,
            'param_scheduler.1.end': SEG_ITERS,
            'default_hooks.checkpoint.interval': 12,
            'default_hooks.checkpoint.max_keep_ckpts': -1,
        })


@pytest.mark.e2e
def test_seg_twin_resumes_bit_identically(shapes_root, tmp_path):
    cfg = _seg_config(shapes_root, tmp_path / 'reference')
    _assert_shipped_pipeline(cfg)
    reference = _run(cfg)

    cfg = _seg_config(shapes_root, tmp_path / 'crashed')
    with pytest.raises(Interrupted):
        _run(cfg, InterruptAt(14))
    gc.collect()
    resumed = _resume(_seg_config(shapes_root, tmp_path / 'resumed'), tmp_path / 'crashed' / 'iter_12.pth')
    _assert_bit_identical(resumed, reference, 'iter_12.pth')


DET_EPOCHS = 2
DET_ITERS_PER_EPOCH = 6  # short epochs (the full one is 64 training images / batch 4 = 16 iterations)


def _det_config(shapes_root: Path, work_dir: Path):
    return load_config(
        'illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py', shapes_root, work_dir,
        **{
            'train_dataloader.num_batch_per_epoch': DET_ITERS_PER_EPOCH,
            'train_cfg.max_epochs': DET_EPOCHS,
            'train_cfg.val_interval': DET_EPOCHS,
            'param_scheduler.1.end': DET_EPOCHS,
            'param_scheduler.1.milestones': [1],  # an epoch-wise lr step between the two epochs
            'default_hooks.checkpoint.interval': 1,
            'default_hooks.checkpoint.max_keep_ckpts': -1,
        })


@pytest.mark.e2e
def test_det_twin_resumes_bit_identically(shapes_root, tmp_path):
    cfg = _det_config(shapes_root, tmp_path / 'reference')
    _assert_shipped_pipeline(cfg)
    reference = _run(cfg)
    assert reference.iter == DET_EPOCHS * DET_ITERS_PER_EPOCH

    mid = DET_ITERS_PER_EPOCH + 3
    work_dir = _interrupt(_det_config(shapes_root, tmp_path / 'crashed'), mid, crash_at=mid + 2)
    for checkpoint in (work_dir / 'epoch_1.pth', work_dir / f'iter_{mid}.pth'):
        resumed = _resume(_det_config(shapes_root, tmp_path / checkpoint.stem), checkpoint)
        _assert_bit_identical(resumed, reference, checkpoint.name)


DIST_ITERS_PER_EPOCH = 7  # 400 training images / batch 64


def _distillation_config(shapes_root: Path, work_dir: Path, teacher: Path):
    """The distillation twin (CaiT student, ResNet-18 teacher read from ``teacher`` at initialisation), 2 epochs."""
    return _two_epoch_config('cait/cait-nano-p16_dist_1xb64-150e_shapes-64px.py', shapes_root, work_dir,
                             **{'param_scheduler.1.T_max': 1, 'model.teacher.checkpoint': str(teacher)})


@pytest.mark.e2e
def test_distillation_twin_resumes_bit_identically(shapes_root, tmp_path):
    """The teacher is read from its own file when the model is initialised (before the Runner resumes) and is not in
    the student's checkpoints: a resumed run continues exactly, from an epoch boundary and from mid-epoch."""
    cfg = _distillation_config(shapes_root, tmp_path / 'reference', tmp_path / 'teacher.pth')
    _assert_shipped_pipeline(cfg)
    torch.manual_seed(0)
    teacher = Runner.from_cfg(cfg).model.teacher  # a random teacher teaches as well as a trained one here
    for parameter in teacher.parameters():
        torch.nn.init.normal_(parameter, std=0.1)
    torch.save({'state_dict': teacher.state_dict()}, tmp_path / 'teacher.pth')
    reference = _run(cfg)
    assert reference.iter == CLS_EPOCHS * DIST_ITERS_PER_EPOCH
    for name, value in teacher.state_dict().items():
        torch.testing.assert_close(reference.model.teacher.state_dict()[name], value, rtol=0, atol=0, msg=name)
    mid = DIST_ITERS_PER_EPOCH + 3
    work_dir = _interrupt(_distillation_config(shapes_root, tmp_path / 'crashed', tmp_path / 'teacher.pth'), mid,
                          crash_at=mid + 2)
    for checkpoint in (work_dir / 'epoch_1.pth', work_dir / f'iter_{mid}.pth'):
        saved = torch.load(checkpoint, map_location='cpu', weights_only=False)['state_dict']
        assert not [key for key in saved if key.startswith('teacher.')]
        resumed = _resume(_distillation_config(shapes_root, tmp_path / checkpoint.stem, tmp_path / 'teacher.pth'),
                          checkpoint)
        _assert_bit_identical(resumed, reference, checkpoint.name)
