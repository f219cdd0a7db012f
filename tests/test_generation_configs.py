"""The generation configs (configs/dit_llama, configs/sit_llama): every row of the paper's Tables 1, 8 and 9 has a
config, each builds without diffusers or the VAE files, its network has the official parameter count (``sum(p.numel())``
of the official models, minus the N x D sin-cos table our networks compute instead of storing) and it carries the
official recipe and sampling preset, and converted official weights load into it. The optimizer, batch and schedule are
checked with every full config in tests/test_configs.py, the FSDP variants in
tests/test_engine/test_sharded_training.py."""
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from build_utils import build_on_meta
from mmcausal.converters import convert_dit
from reference.official_dit import build_official

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ('dit_llama', 'sit_llama')
#: (size, patch, block) -> the official model's parameter count (sum(p.numel()), with the N x D table)
OFFICIAL_COUNTS = {
    ('small', 2, 'dit'): 32_963_360, ('small', 2, 'llama'): 32_940_320,
    ('base', 2, 'dit'): 130_512_416, ('base', 2, 'llama'): 130_466_336,
    ('base', 4, 'dit'): 130_475_648, ('base', 4, 'llama'): 130_429_568,
    ('large', 2, 'dit'): 458_102_816, ('large', 2, 'llama'): 464_271_392,
    ('large', 4, 'dit'): 458_053_760, ('large', 4, 'llama'): 464_222_336,
    ('xlarge', 2, 'dit'): 675_129_632, ('xlarge', 2, 'llama'): 674_968_352,
    ('xlarge', 4, 'dit'): 675_074_432, ('xlarge', 4, 'llama'): 674_913_152,
}
WIDTH = dict(small=384, base=768, large=1024, xlarge=1152)
#: the paper's rows: Table 1 (DiT-LLaMA and DiT, DDPM) and Tables 8 / 9 (SiT-LLaMA and SiT, interpolant)
ROWS = {('dit_llama', prefix, size, patch, iters) for prefix in ('dit-llama', 'dit')
        for size, patch, iters in (('base', 4, 400), ('large', 4, 400), ('xlarge', 4, 400), ('xlarge', 2, 2400))} | {
    ('sit_llama', prefix, size, 2, 400) for prefix in ('sit-llama', 'sit') for size in WIDTH}
#: the official sample_ddp.py scripts: guidance on the first 3 latent channels (forward_with_cfg of DiT, SiT and
#: their LLaMA variants) and labels drawn uniformly at random
OFFICIAL_DIT_SAMPLING = dict(sampler='ddpm', num_steps=250, cfg_scale=1.5, cfg_channels=3, seed=0, label_rule='random')
OFFICIAL_SIT_SDE = dict(sampler='sde', num_steps=250, method='euler', diffusion_form='sigma', diffusion_norm=1.,
                        last_step='mean', last_step_size=0.04, cfg_scale=1., cfg_channels=3, seed=0,
                        label_rule='random')
OFFICIAL_SIT_ODE = dict(OFFICIAL_SIT_SDE, sampler='ode', method='dopri5', atol=1e-6, rtol=1e-3)


def configs():
    """The full-size configs (the CPU twins, ``*_shapes-*``: tests/test_generation_twins.py)."""
    return sorted(str(path.relative_to(ROOT / 'configs')) for folder in FOLDERS
                  for path in (ROOT / 'configs' / folder).glob('*.py') if '_shapes-' not in path.name)


def test_every_table_row_has_a_config():
    names = {Path(name).name for name in configs()}
    expected = {f'{prefix}-{size}-p{patch}_8xb32-{iters}k_in1k-256px.py' for _, prefix, size, patch, iters in ROWS}
    assert expected <= names
    fsdp = {name for name in names if '-fsdp-' in name}
    assert fsdp == {'dit-llama-xlarge-p2_8xb32-fsdp-2400k_in1k-256px.py',
                    'sit-llama-xlarge-p2_8xb32-fsdp-400k_in1k-256px.py'}
    assert names == expected | fsdp


@pytest.mark.parametrize('name', configs())
def test_config_builds_without_diffusers_or_vae_files_and_counts_as_official(name, monkeypatch):
    monkeypatch.setitem(sys.modules, 'diffusers', None)  # any import of diffusers fails
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    assert not Path(cfg.model.autoencoder.decoder.pretrained).exists()
    model = build_on_meta(cfg)
    network = model.network
    size = cfg.model.network.arch
    official = OFFICIAL_COUNTS[(size, network.patch_size, network.block)]
    tokens = (32 // network.patch_size) ** 2
    assert sum(p.numel() for p in network.parameters()) == official - tokens * WIDTH[size]
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in network.parameters())
    assert network.block == ('dit' if Path(name).name.startswith(('dit-', 'sit-')) and '-llama-' not in name
                             else 'llama')
    assert (network.in_channels, network.input_size, network.num_classes) == (4, (32, 32), 1000)
    assert network.learn_sigma and network.y_embedder.drop_prob == 0.1
    assert (type(model.autoencoder).__name__, model.autoencoder.scale) == ('MomentsLatents', 0.18215)


@pytest.mark.parametrize('name', configs())
def test_config_has_the_official_objective_sampling_and_bookkeeping(name):
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    if name.startswith('dit_llama/'):
        assert cfg.model.objective == dict(type='GaussianDiffusion', num_timesteps=1000, learn_sigma=True)
        assert cfg.model.test_cfg == OFFICIAL_DIT_SAMPLING
    else:
        assert cfg.model.objective == dict(type='LinearInterpolant')
        sde = dict(cfg.model.test_cfg)
        assert sde.pop('method') is None  # each sampler's official default (test_transport: Euler-Maruyama, dopri5)
        assert dict(sde, method='euler') == OFFICIAL_SIT_SDE and cfg.official_sit_ode_sampling == OFFICIAL_SIT_ODE
    ema = cfg.custom_hooks[-1]
    assert ema.type in ('EMAHook', 'ShardedEMAHook') and (ema.momentum, ema.interval) == (1e-4, 1)
    assert ema.get('ema_type', 'ExponentialMovingAverage') == 'ExponentialMovingAverage'
    assert not ema.get('update_buffers', False)
    assert cfg.train_cfg.type == 'ExactResumeIterBasedTrainLoop'
    checkpoint = cfg.default_hooks.checkpoint
    assert (checkpoint.by_epoch, checkpoint.interval) == (False, 50_000)
    assert (cfg.randomness.seed, cfg.randomness.diff_rank_seed) == (0, True)
    assert cfg.train_dataloader.dataset.type == 'LatentMomentsDataset' and cfg.train_dataloader.dataset.flip_prob == 0.5
    assert cfg.val_dataloader is None and cfg.get('auto_scale_lr') is None


@pytest.mark.parametrize('name', configs())
def test_guidance_and_labels_follow_the_official_sample_scripts(name):
    """Every DiT and SiT preset (the SDE one and the ODE one derived from it) guides the first 3 latent channels and
    draws random labels, as the official forward_with_cfg and sample_ddp.py."""
    cfg = Config.fromfile(str(ROOT / 'configs' / name))
    presets = [cfg.model.test_cfg] + ([cfg.official_sit_ode_sampling] if name.startswith('sit_llama/') else [])
    for preset in presets:
        assert (preset.cfg_channels, preset.label_rule) == (3, 'random')


@pytest.mark.parametrize('official_name,name', [
    ('DiT-LLaMA-B/4', 'dit_llama/dit-llama-base-p4_8xb32-400k_in1k-256px.py'),
    ('DiT-XL/2', 'dit_llama/dit-xlarge-p2_8xb32-2400k_in1k-256px.py'),
    ('SiT-LLaMA-S/2', 'sit_llama/sit-llama-small-p2_8xb32-400k_in1k-256px.py'),
])
def test_converted_official_weights_load_strictly_into_the_config(official_name, name):
    """dit2mmcausal's output of an official-layout model (the oracle, on meta) is exactly the config model's state."""
    with torch.device('meta'):
        official = build_official(official_name)
    converted = convert_dit(official.state_dict())
    model = build_on_meta(Config.fromfile(str(ROOT / 'configs' / name)))
    assert {key: value.shape for key, value in converted.items()} == \
        {key: value.shape for key, value in model.state_dict().items()}
    assert str(model.load_state_dict(converted, strict=True, assign=True)) == '<All keys matched successfully>'
