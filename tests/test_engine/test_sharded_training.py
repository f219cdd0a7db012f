"""Sharded training of the Large models (FSDP through mmengine's FlexibleRunner): the sharded configs are their
unsharded recipes plus the strategy, every block is an FSDP unit, ``ShardedEMAHook`` averages as mmengine's EMA
does, and a 2-process CPU (gloo) run of a tiny twin under the strategy resumes exactly from a sharded checkpoint
(``tests/sharded_run.py``)."""
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.model import ExponentialMovingAverage
from mmengine.registry import init_default_scope
from torch.distributed.fsdp import FullyShardedDataParallel

from build_utils import build_on_meta
from e2e_utils import ROOT, load_config, run_command
from mmcausal.engine import ShardedEMAHook, block_wrap_policy
from mmcausal.registry import MODELS
from mmcausal.utils import end_distributed_run

#: sharded config -> (its unsharded recipe, the keys it changes besides the strategy, FSDP units of its model)
SHARDED = {
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-fsdp-coslr-800e_in1k.py':
        ('vision_llama/mae_vision-llama-large-p16_8xb512-amp-coslr-800e_in1k.py', set(), 24 + 8),
    'vision_llama/mae_vision-llama-large-p16_8xb512-amp-fsdp-coslr-1600e_in1k.py':
        ('vision_llama/mae_vision-llama-large-p16_8xb512-amp-coslr-1600e_in1k.py', set(), 24 + 8),
    'defocus/defocus-mamba-large_8xb32-fsdp-20e_in21k-pre_in1k-384px.py':
        ('defocus/defocus-mamba-large_8xb32-20e_in21k-pre_in1k-384px.py', {'model', 'custom_hooks', 'load_from'}, 48),
    'cait/cait-m48_32xb8-fsdp-60e_in1k-448px.py':
        ('cait/cait-m48_32xb8-60e_in1k-448px.py', {'model', 'load_from'}, 48 + 2),
    'dit_llama/dit-llama-xlarge-p2_8xb32-fsdp-2400k_in1k-256px.py':
        ('dit_llama/dit-llama-xlarge-p2_8xb32-2400k_in1k-256px.py', {'custom_hooks'}, 28),
    'sit_llama/sit-llama-xlarge-p2_8xb32-fsdp-400k_in1k-256px.py':
        ('sit_llama/sit-llama-xlarge-p2_8xb32-400k_in1k-256px.py', {'custom_hooks'}, 28),
}
STRATEGY_KEYS = {'runner_type', 'strategy', 'init_weights_for_test_or_val'}


def _config(name: str) -> Config:
    return Config.fromfile(str(ROOT / 'configs' / name))


@pytest.mark.parametrize('name', sorted(SHARDED))
def test_sharded_config_is_its_recipe_under_fsdp(name):
    sharded, (unsharded_name, changed, _) = _config(name), SHARDED[name]
    assert sharded.runner_type == 'FlexibleRunner'
    assert sharded.strategy == dict(type='FSDPStrategy', model_wrapper=dict(auto_wrap_policy=dict(
        type='block_wrap_policy')))
    unsharded = _config(unsharded_name).to_dict()
    differing = {key for key in sharded.to_dict().keys() | unsharded.keys()
                 if sharded.to_dict().get(key) != unsharded.get(key)}
    assert differing == STRATEGY_KEYS | changed
    if 'model' in changed:  # the start weights move from load_from to the model's init, the model is unchanged
        assert sharded.load_from is None and sharded.model.init_cfg.type == 'Pretrained'
        assert unsharded['load_from'] in (None, sharded.model.init_cfg.checkpoint)
        assert {**sharded.model.to_dict(), 'init_cfg': None} == {**unsharded['model'], 'init_cfg': None}
    if 'custom_hooks' in changed:  # ShardedEMAHook with the EMA settings of the recipe's EMAHook
        hooks = [{**hook, 'type': hook['type'].replace('ShardedEMAHook', 'EMAHook')} for hook in sharded.custom_hooks]
        assert hooks == unsharded['custom_hooks']


@pytest.mark.parametrize('name', sorted(SHARDED))
def test_every_block_is_an_fsdp_unit(name):
    model = build_on_meta(_config(name))
    units = [module for module in model.modules() if block_wrap_policy(module, recurse=False, nonwrapped_numel=0)]
    assert len(units) == SHARDED[name][2]
    assert block_wrap_policy(model, recurse=True, nonwrapped_numel=0)
    in_units = sum(param.numel() for unit in units for param in unit.parameters())
    assert in_units / sum(param.numel() for param in model.parameters()) > 0.95  # the root unit keeps little


def _runner(module: torch.nn.Module) -> SimpleNamespace:
    return SimpleNamespace(model=module, strategy=None)


def test_sharded_ema_averages_as_mmengine_ema():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    reference = ExponentialMovingAverage(model, momentum=0.1, interval=2)
    hook = ShardedEMAHook(momentum=0.1, interval=2)
    hook.before_run(_runner(model))
    for _ in range(5):
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn_like(param))
        reference.update_parameters(model)
        hook.after_train_iter(_runner(model), 0)
    for average, expected in zip(hook.averages, reference.module.parameters()):
        torch.testing.assert_close(average, expected, rtol=0, atol=0)

    trained = [param.detach().clone() for param in model.parameters()]
    hook.before_val_epoch(_runner(model))  # evaluates on the average
    for param, expected in zip(model.parameters(), reference.module.parameters()):
        torch.testing.assert_close(param, expected, rtol=0, atol=0)
    hook.after_val_epoch(_runner(model))
    for param, expected in zip(model.parameters(), trained):
        torch.testing.assert_close(param, expected, rtol=0, atol=0)


@pytest.mark.parametrize('load_first', [True, False], ids=['FlexibleRunner', 'Runner'])
def test_sharded_ema_resumes_from_its_checkpoint_entry(load_first):
    """The EMA shards come back whether the checkpoint is loaded before ``before_run`` (FlexibleRunner) or after."""
    model = torch.nn.Linear(3, 2)
    saved = ShardedEMAHook(momentum=0.5)
    saved.before_run(_runner(model))
    for _ in range(3):
        with torch.no_grad():
            model.weight.add_(1.)
        saved.after_train_iter(_runner(model), 0)
    checkpoint = {}
    saved.before_save_checkpoint(_runner(model), checkpoint)
    resumed = ShardedEMAHook(momentum=0.5)
    steps = (lambda: resumed.after_load_checkpoint(_runner(model), checkpoint),
             lambda: resumed.before_run(_runner(model)))
    for step in (steps if load_first else steps[::-1]):
        step()
    assert resumed.steps == saved.steps == 3
    for average, expected in zip(resumed.averages, saved.averages):
        torch.testing.assert_close(average, expected, rtol=0, atol=0)
    other = ShardedEMAHook()
    other.before_run(_runner(torch.nn.Linear(3, 3)))
    with pytest.raises(ValueError, match='another model or world size'):
        other.after_load_checkpoint(_runner(torch.nn.Linear(3, 3)), checkpoint)


def test_end_distributed_run_destroys_the_process_group(tmp_path):
    """The tools end by destroying their process group (a gloo rank that exits with it alive can abort, and torchrun
    then reports the finished run as failed); without a group it does nothing."""
    end_distributed_run()
    dist.init_process_group('gloo', store=dist.FileStore(str(tmp_path / 'store'), 1), rank=0, world_size=1)
    assert dist.is_initialized()
    end_distributed_run()
    assert not dist.is_initialized()


@pytest.fixture
def one_process_group(tmp_path):
    dist.init_process_group('gloo', store=dist.FileStore(str(tmp_path / 'store'), 1), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_scheduled_drop_path_reaches_the_blocks_inside_fsdp_units(one_process_group):
    """An FSDP unit passes attribute reads to its block but not writes: the backbone sets the block's rate."""
    init_default_scope('mmpretrain')
    backbone = MODELS.build(dict(type='DefocusMamba', arch=dict(embed_dims=32, num_layers=3, dt_rank=2),
                                 img_size=32, patch_size=16))
    FullyShardedDataParallel(backbone, auto_wrap_policy=block_wrap_policy, device_id=torch.device('cpu'))
    assert all(isinstance(block, FullyShardedDataParallel) for block in backbone.layers)
    backbone.drop_path_rate = 0.4
    assert [block.drop_path.drop_prob for block in backbone.layers] == pytest.approx([0., 0.2, 0.4])


# ------------------------------------------------------------------------------------- 2 processes, FSDP over gloo
TWIN = 'defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py'
LARGE = 'defocus/defocus-mamba-large_8xb32-fsdp-20e_in21k-pre_in1k-384px.py'


def _sharded_twin(shapes_root: Path, work_dir: Path) -> Config:
    """The De-focus twin under the De-focus-L sharded config's strategy, EMA hook swap and gradient checkpointing:
    2 epochs of 2 iterations per rank (32 images, 8 per rank and batch), sharded checkpoints at iterations 2 and 4,
    validation (on the EMA) after the last epoch, data loaded in the main processes."""
    cfg = load_config(TWIN, shapes_root, work_dir, **{
        'train_cfg.max_epochs': 2, 'train_cfg.val_interval': 2, 'model.backbone.with_cp': True,
        'train_dataloader.dataset.indices': 32, 'train_dataloader.batch_size': 8,
        'val_dataloader.dataset.indices': 16, 'test_dataloader.dataset.indices': 16,
        **{f'{split}_dataloader.{key}': value for split in ('train', 'val', 'test')
           for key, value in (('num_workers', 0), ('persistent_workers', False))},  # no worker start-ups
        'default_hooks.checkpoint.by_epoch': False, 'default_hooks.checkpoint.interval': 2,
        'default_hooks.checkpoint.max_keep_ckpts': -1})
    large = _config(LARGE)
    for key in STRATEGY_KEYS:
        cfg[key] = large[key]
    cfg.custom_hooks = [dict(hook, type='ShardedEMAHook') if hook['type'] == 'EMAHook' else hook
                        for hook in cfg.custom_hooks]
    return cfg


@pytest.mark.e2e
def test_twin_resumes_exactly_from_a_sharded_checkpoint(shapes_root, tmp_path):
    config = tmp_path / 'defocus-mamba-nano_fsdp.py'
    _sharded_twin(shapes_root, tmp_path).dump(str(config))
    run_command([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2',
                 'tests/sharded_run.py', str(config), str(tmp_path)], timeout=300, OMP_NUM_THREADS='1')
    result = json.loads((tmp_path / 'result.json').read_text())
    print('sharded twin (2 ranks, gloo):', result)
    assert result['log']['train/drop_path_rate'] == [0.0, 0.0, 0.2, 0.2]  # reached every block through FSDP
    assert len(result['log']['train/loss']) == 4 and 0 <= result['test_accuracy'] <= 100
