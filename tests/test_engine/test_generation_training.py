"""Training a generative model through mmengine's Runner with the shipped ImageNet recipes shrunk to a tiny network
and a tiny store of latent moments: it resumes exactly from an iteration checkpoint (weights, optimizer
and EMA), it samples from the EMA weights, which its checkpoints store as their ``state_dict``, and SampleGridHook
writes grids of the EMA generator's samples of fixed noise."""
import gc
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.runner import Runner
from mmpretrain.structures import DataSample
from PIL import Image

import fake_diffusers
from e2e_utils import InterruptAt, Interrupted
from mmcausal.datasets import LatentMomentsStore
from mmcausal.engine import SampleGridHook

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures('single_thread')]

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {'ddpm': 'dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py',
           'interpolant': 'sit_llama/sit-llama-small-p2_8xb32-400k_in1k-256px.py'}
ITERS = 8


@pytest.fixture(scope='module')
def store(tmp_path_factory) -> Path:
    """24 images' moments (crop and flip, 8 x 4 x 4: a 32 px image's SD-VAE moments), 4 classes."""
    folder = tmp_path_factory.mktemp('moments')
    rng = np.random.default_rng(0)
    labels = np.arange(24) % 4
    writer = LatentMomentsStore(str(folder), labels, (8, 4, 4))
    mean = rng.normal(0, 4, (24, 2, 4, 4, 4)) + labels.reshape(-1, 1, 1, 1, 1)
    writer.append(np.concatenate((mean, np.full_like(mean, -3.)), axis=2))
    return folder


def _config(objective: str, store: Path, work_dir: Path) -> Config:
    cfg = Config.fromfile(str(ROOT / 'configs' / CONFIGS[objective]))
    cfg.merge_from_dict({
        'model.network.arch': dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2),
        'model.network.patch_size': 2,
        'model.network.input_size': 4,
        'model.network.num_classes': 4,
        'model.test_cfg.num_steps': 3,
        'train_dataloader.batch_size': 4,
        'train_dataloader.num_workers': 1,
        'train_dataloader.dataset.data_root': str(store),
        'optim_wrapper.optimizer.lr': 3e-3,  # weights that move in 8 steps
        'train_cfg.max_iters': ITERS,
        'default_hooks.checkpoint.interval': 4,
        'default_hooks.logger.interval': 1,
    })
    cfg.work_dir = str(work_dir)
    return cfg


def _train(cfg: Config, *hooks: Hook) -> Runner:
    runner = Runner.from_cfg(cfg)
    for hook in hooks:
        runner.register_hook(hook)
    runner.train()
    return runner


def _ema_hook(runner: Runner) -> Hook:
    return next(hook for hook in runner.hooks if type(hook).__name__ == 'EMAHook')


@pytest.fixture(autouse=True)
def fresh_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv('HOME', str(tmp_path / 'home'))


@pytest.mark.parametrize('objective', list(CONFIGS))
def test_tiny_generative_run_resumes_exactly(objective, store, tmp_path):
    reference = _train(_config(objective, store, tmp_path / 'reference'))
    assert reference.iter == ITERS

    with pytest.raises(Interrupted):
        _train(_config(objective, store, tmp_path / 'crashed'), InterruptAt(6))
    gc.collect()
    cfg = _config(objective, store, tmp_path / 'resumed')
    Path(cfg.work_dir).mkdir(parents=True)
    checkpoint = shutil.copy(tmp_path / 'crashed' / 'iter_4.pth', cfg.work_dir)
    cfg.resume, cfg.load_from = True, str(checkpoint)
    resumed = _train(cfg)
    assert resumed.iter == ITERS
    expected = reference.model.state_dict()
    for name, value in resumed.model.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=name)
    expected = _ema_hook(reference).ema_model.state_dict()
    for name, value in _ema_hook(resumed).ema_model.state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0, msg=f'EMA {name}')


def test_sampling_uses_the_ema_weights(store, tmp_path):
    runner = _train(_config('ddpm', store, tmp_path))
    model, hook = runner.model.eval(), _ema_hook(runner)
    data = [DataSample(metainfo=dict(sample_idx=i)).set_gt_label(i % 4) for i in range(4)]
    live = model(data_samples=data, mode='tensor')
    hook.before_test_epoch(runner)  # what the runner's val / test loops do: swap the EMA weights in
    ema = model(data_samples=data, mode='tensor')
    ema_weights = {name: value.clone() for name, value in model.state_dict().items()}
    hook.after_test_epoch(runner)
    torch.testing.assert_close(model(data_samples=data, mode='tensor'), live, rtol=0, atol=0)
    assert (ema - live).abs().max() > 1e-3  # the weights differ, so do the samples

    # the checkpoint's state_dict is the EMA (what tools/generation/sample.py and tools/test.py load)
    saved = torch.load(tmp_path / f'iter_{ITERS}.pth', map_location='cpu', weights_only=False)
    for name, value in saved['state_dict'].items():
        torch.testing.assert_close(value, ema_weights[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(value, ema_weights[name.removeprefix('module.')])
               for name, value in saved['ema_state_dict'].items() if name.startswith('module.'))


def test_sample_grids_show_the_ema_generator_on_fixed_noise(store, tmp_path, monkeypatch):
    fake_diffusers.install(monkeypatch)  # decodes latents by up-sampling 3 of their channels 8x
    (tmp_path / 'vae').mkdir()
    (tmp_path / 'vae' / 'config.json').write_text('{}')

    def run(work_dir: Path, *hooks: dict) -> Runner:
        cfg = _config('ddpm', store, work_dir)
        cfg.model.autoencoder.decoder.pretrained = str(tmp_path / 'vae')
        cfg.custom_hooks = [*cfg.custom_hooks, *hooks]
        return _train(cfg)

    grid_hook = dict(type='SampleGridHook', interval=3, labels=[0, 3], samples_per_label=3)
    runner = run(tmp_path / 'grids', grid_hook)
    folder = tmp_path / 'grids' / 'sample_grids'
    assert sorted(path.name for path in folder.iterdir()) == ['iter_3.png', 'iter_6.png', 'iter_8.png']
    last = np.asarray(Image.open(folder / 'iter_8.png'))
    # 2 rows x 3 columns of 32 px images, 2 px padding, after the rows' names
    assert last.shape[0] == 2 + 2 * 34 and last.shape[1] > 2 + 3 * 34
    ema_model = _ema_hook(runner).ema_model.module
    assert np.array_equal(last, SampleGridHook(labels=[0, 3], samples_per_label=3).grid(ema_model))
    live = SampleGridHook(labels=[0, 3], samples_per_label=3, use_ema=False).grid(runner.model)
    assert np.abs(live.astype(int) - last).mean() > 1  # the live weights are not the ones sampled
    assert runner.model.training and ema_model.training  # the hook restores the modes

    plain = run(tmp_path / 'plain').model.state_dict()  # the hook does not change the training run
    for name, value in runner.model.state_dict().items():
        torch.testing.assert_close(value, plain[name], rtol=0, atol=0, msg=name)


def test_generator_trains_with_every_adaln_block_an_fsdp_unit(tmp_path):
    """What the sharded XL configs run, on one gloo process: FSDP units per adaLN-Zero block, loss and backward through
    them, and SampleGridHook sampling through the FSDP model."""
    from torch import distributed as dist
    from torch.distributed.fsdp import FullyShardedDataParallel

    from mmcausal.engine import block_wrap_policy
    from mmcausal.models.generation.conditioning import AdaLNZeroBlock
    from mmcausal.registry import MODELS

    dist.init_process_group('gloo', store=dist.FileStore(str(tmp_path / 'store'), 1), rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = MODELS.build(dict(type='ClassConditionalDiffusion', objective=dict(type='GaussianDiffusion'),
                                  network=dict(type='DiffusionTransformer', patch_size=2, in_channels=3, input_size=8,
                                               arch=dict(embed_dims=32, num_layers=3, num_heads=2), num_classes=4),
                                  test_cfg=dict(sampler='ddim', num_steps=2)))
        sharded = FullyShardedDataParallel(model, auto_wrap_policy=block_wrap_policy, device_id=torch.device('cpu'),
                                           use_orig_params=True)
        units = [module for module in sharded.modules() if isinstance(module, FullyShardedDataParallel)]
        assert [type(unit.module).__name__ for unit in units[1:]] == [AdaLNZeroBlock.__name__] * 3
        data = model.data_preprocessor(dict(inputs=[torch.zeros(3, 8, 8, dtype=torch.uint8)] * 2,
                                            data_samples=[DataSample().set_gt_label(i) for i in (0, 1)]), True)
        loss = sharded(**data, mode='loss')['loss']
        loss.backward()
        assert torch.isfinite(loss) and all(p.grad is not None for p in sharded.parameters() if p.requires_grad)
        grid = SampleGridHook(labels=[1, 2], samples_per_label=1).grid(sharded)  # sampled through the FSDP forward
        assert grid.shape[0] == 2 + 2 * 10 and grid.shape[1] > 2 + 10 and sharded.training  # rows named on the left
    finally:
        dist.destroy_process_group()
