"""Every twin's training sampler visits every training image once per epoch on one process.

mmpretrain's ``RepeatAugSampler`` keeps the epoch length and repeats each index ``num_repeats`` times, so on one
process an epoch holds only ``1 / num_repeats`` of the images (each repeated inside one batch): a twin trained
that way sees a third of its data.
"""
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.dataset import DefaultSampler, InfiniteSampler  # noqa: F401  (registers mmengine's samplers)

ROOT = Path(__file__).resolve().parents[2]
TWINS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'configs').glob('*/*_shapes-*.py'))


class _Sized:
    """A dataset stand-in of ``n`` items (samplers read only ``len``)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize('config', TWINS)
def test_one_epoch_visits_every_image(config):
    from mmpretrain.registry import DATA_SAMPLERS
    sampler_cfg = dict(Config.fromfile(str(ROOT / config)).train_dataloader.sampler)
    sampler_cfg.pop('_scope_', None)
    n = 60
    sampler = DATA_SAMPLERS.build(dict(sampler_cfg, dataset=_Sized(n), seed=0))
    iterator = iter(sampler)
    epoch = [next(iterator) for _ in range(n)]
    assert sorted(epoch) == list(range(n)), f'{sampler_cfg["type"]}: {len(set(epoch))} of {n} images per epoch'
