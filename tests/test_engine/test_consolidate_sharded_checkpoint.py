"""``tools/model_converters/consolidate_sharded_checkpoint.py``: offloads the gathered weights to the CPU only from a
GPU (torch 2.11 crashes in FSDP's state-dict clone when a CPU model offloads), and bad input ends it in one line.
One process (world size 1, gloo) stands in for a torchrun job; the 2-process run is in ``test_sharded_training.py``."""
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.registry import STRATEGIES, init_default_scope
from torch.distributed.fsdp import FullStateDictConfig

from e2e_utils import ROOT
from mmcausal.utils import end_distributed_run
from report_utils import report_text
from sharded_run import tool

consolidate_tool = tool('tools/model_converters/consolidate_sharded_checkpoint.py')
TWIN = ROOT / 'configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py'
LARGE = ROOT / 'configs/defocus/defocus-mamba-large_8xb32-fsdp-20e_in21k-pre_in1k-384px.py'


def _with_parameters_on(*devices: str) -> SimpleNamespace:
    return SimpleNamespace(parameters=lambda: iter([SimpleNamespace(device=torch.device(d)) for d in devices]))


@pytest.mark.parametrize('devices, offload', [(('cpu',), False), (('cpu', 'meta'), False), (('cuda:0',), True),
                                              (('cuda:0', 'cuda:1'), True)])
def test_gathered_weights_are_offloaded_only_from_a_gpu(devices, offload):
    full = consolidate_tool.full_state_dict_config(_with_parameters_on(*devices))
    assert full.offload_to_cpu is offload and full.rank0_only


@pytest.fixture(scope='module')
def sharded_checkpoint(tmp_path_factory):
    """A sharded config (the De-focus twin under the De-focus-L strategy, no EMA), a checkpoint of its model saved by
    one rank, and its weights, in a world-size-1 gloo group that the module's tests keep."""
    tmp_path = tmp_path_factory.mktemp('sharded')
    with pytest.MonkeyPatch.context() as env:
        env.setenv('LOCAL_RANK', '0')
        yield from _one_rank_checkpoint(tmp_path)


def _one_rank_checkpoint(tmp_path: Path):
    cfg = Config.fromfile(str(TWIN))
    large = Config.fromfile(str(LARGE))
    for key in ('runner_type', 'strategy', 'init_weights_for_test_or_val'):
        cfg[key] = large[key]
    cfg.custom_hooks = []
    config = tmp_path / 'sharded.py'
    cfg.dump(str(config))
    end_distributed_run()
    dist.init_process_group('gloo', store=dist.FileStore(str(tmp_path / 'store'), 1), rank=0, world_size=1)
    init_default_scope(cfg.default_scope)
    strategy = STRATEGIES.build(dict(cfg.strategy, work_dir=str(tmp_path / 'logs'),
                                     env_kwargs=dict(launcher='pytorch')))
    model = strategy.prepare(cfg.model, dispatch_kwargs=dict(init_weights_for_test_or_val=False))
    strategy.save_checkpoint(str(tmp_path / 'iter_2.pth'), save_optimizer=False, save_param_scheduler=False)
    with torch.no_grad():
        weights = {key: value.clone() for key, value in model.module.state_dict().items()}
    yield config, tmp_path / 'iter_2.pth', weights
    end_distributed_run()


def test_a_cpu_model_consolidates_to_its_weights_without_offloading(sharded_checkpoint, tmp_path, monkeypatch):
    config, checkpoint, weights = sharded_checkpoint
    used = []
    monkeypatch.setattr(consolidate_tool, 'FullStateDictConfig',
                        lambda **kwargs: used.append(kwargs) or FullStateDictConfig(**kwargs))
    consolidate_tool.main([str(config), str(checkpoint), str(tmp_path / 'out.pth')])
    assert used == [dict(offload_to_cpu=False, rank0_only=True)]
    saved = torch.load(tmp_path / 'out.pth', weights_only=True)['state_dict']
    assert saved.keys() == weights.keys()
    for key, value in weights.items():
        torch.testing.assert_close(saved[key], value, rtol=0, atol=0, msg=key)


# (id, argv from (config, sharded checkpoint, tmp_path), exit status, message pattern) - as the tools' catalogue
CATALOGUE = [
    ('config-missing', lambda cfg, ckpt, tmp: [str(tmp / 'nope.py'), str(ckpt), str(tmp / 'o.pth')], 2,
     'config file not found'),
    ('checkpoint-missing', lambda cfg, ckpt, tmp: [str(cfg), str(tmp / 'missing'), str(tmp / 'o.pth')], 2,
     r'missing is no sharded checkpoint \(a directory of rank\*\.pth files\)'),
    ('checkpoint-single-file', lambda cfg, ckpt, tmp: [str(cfg), str(ckpt / 'rank0.pth'), str(tmp / 'o.pth')], 2,
     'rank0.pth is a single checkpoint file, nothing to consolidate'),
    ('ema-without-ema-hook', lambda cfg, ckpt, tmp: [str(cfg), str(ckpt), str(tmp / 'o.pth'), '--ema'], 1,
     r'ConfigValueError: --ema: .*iter_2\.pth has no EMA weights \(the run had no ShardedEMAHook\); drop --ema'),
    ('config-not-sharded', lambda cfg, ckpt, tmp: [str(TWIN), str(ckpt), str(tmp / 'o.pth')], 1,
     r'ConfigValueError: the config trains without a sharded \(FSDP\) strategy'),
    ('other-world-size', lambda cfg, ckpt, tmp: [str(cfg), str(_with_another_rank(ckpt, tmp)), str(tmp / 'o.pth')],
     1, r'ConfigValueError: .*two_ranks holds the shards of 2 processes, but this run has 1'),
]


def _with_another_rank(checkpoint: Path, tmp_path: Path) -> Path:
    """A copy of ``checkpoint`` with a second rank's file, as a 2-process run saves it."""
    copy = tmp_path / 'two_ranks'
    copy.mkdir()
    for rank in (0, 1):
        (copy / f'rank{rank}.pth').write_bytes((checkpoint / 'rank0.pth').read_bytes())
    return copy


@pytest.mark.parametrize('case', CATALOGUE, ids=[case[0] for case in CATALOGUE])
def test_bad_input_ends_in_one_line(case, sharded_checkpoint, tmp_path, request):
    """Exit status 2: argparse's usage error on stderr; 1: ``SystemExit('<ErrorType>: <what to change>')``. (stderr
    is captured only for argparse: a logger that a strategy built under ``capsys`` would outlive its stream.)"""
    config, checkpoint, _ = sharded_checkpoint
    capsys = request.getfixturevalue('capsys') if case[2] == 2 else None
    with pytest.raises(SystemExit) as exit_info:
        consolidate_tool.main(case[1](config, checkpoint, tmp_path))
    code = exit_info.value.code
    if capsys is None:
        status, last = 1, report_text(exit_info.value)
    else:
        stderr = capsys.readouterr().err
        status, last = code, stderr.strip().splitlines()[-1]
        assert 'Traceback' not in stderr
    assert status == case[2] and re.search(case[3], last), (status, last)
    assert isinstance(last, str) and '\n' not in last
    assert not (tmp_path / 'o.pth').exists()
