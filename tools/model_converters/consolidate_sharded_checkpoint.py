"""Turn a sharded checkpoint (the ``rank*.pth`` directory an FSDP run saves) into one regular checkpoint file.

    torchrun --nproc_per_node N tools/model_converters/consolidate_sharded_checkpoint.py \
        SHARDED_CONFIG work_dirs/RUN/epoch_20.pth work_dirs/RUN/epoch_20_consolidated.pth [--ema | --no-ema]

Run it with the sharded config and the world size (``N`` processes in all, ``--nnodes`` too) of the run that saved
the checkpoint: each process loads its shard, and FSDP gathers the full weights on rank 0, which writes ``meta`` and
the ``state_dict`` with the model's own keys (``backbone.*``, ``head.*`` ...). The output is what a plain run saves:
``tools/test.py`` with the unsharded config, fine-tuning (``Pretrained``) and the converters read it. Where the run
kept a ``ShardedEMAHook`` average, the output holds the average, as mmengine's ``EMAHook`` puts it in a plain run's
``state_dict`` (so sampling and testing a consolidated DiT-LLaMA / SiT-LLaMA file use the EMA); ``--no-ema`` writes
the trained weights instead, ``--ema`` insists on the average. On a CPU-only host the processes run FSDP over
gloo, so no GPU is needed. A missing config or checkpoint, another world size, or ``--ema`` for a run without EMA
ends it with one line.
"""
import argparse
import glob
import os.path as osp
import tempfile
from typing import List, Optional

import torch
from mmengine.config import Config
from mmengine.dist import get_world_size, is_main_process
from mmengine.logging import print_log
from mmengine.registry import STRATEGIES, init_default_scope
from mmengine.runner.checkpoint import save_checkpoint
from torch.distributed.fsdp import FullStateDictConfig, FullyShardedDataParallel, StateDictType

import mmcausal  # noqa: F401  (the shims and the registered components)
from mmcausal.engine.hooks.sharded_ema_hook import CHECKPOINT_KEY, copy_shards, ema_parameters
from mmcausal.utils import ConfigValueError, end_distributed_run
from mmcausal.utils.config_reading import read_config
from mmcausal.utils.error_report import user_errors_end_in_one_line


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Consolidate a sharded (FSDP) checkpoint into one file')
    parser.add_argument('config', help='the sharded config the checkpoint was trained with')
    parser.add_argument('checkpoint', help='the sharded checkpoint: a directory of rank*.pth files')
    parser.add_argument('out', help='the consolidated checkpoint file to write')
    parser.add_argument('--ema', action=argparse.BooleanOptionalAction, default=None,
                        help='write the ShardedEMAHook average (--ema: and fail without one) or the trained weights '
                             '(--no-ema); default: the average where the run kept one, as a plain run saves it')
    args = parser.parse_args(argv)
    if not osp.isfile(args.config):
        parser.error(f'config file not found: {args.config}')
    if not osp.isfile(osp.join(args.checkpoint, 'rank0.pth')):
        what = 'is a single checkpoint file, nothing to consolidate' if osp.isfile(args.checkpoint) else \
            'is no sharded checkpoint (a directory of rank*.pth files)'
        parser.error(f'{args.checkpoint} {what}')
    return args


def full_state_dict_config(model: torch.nn.Module) -> FullStateDictConfig:
    """Gather the full weights on rank 0, moved to the CPU only when they are on a GPU: on a CPU (gloo) model
    ``offload_to_cpu=True`` makes rank 0 crash (SIGSEGV) in FSDP's state-dict clone under torch 2.11."""
    on_gpu = any(parameter.device.type == 'cuda' for parameter in model.parameters())
    return FullStateDictConfig(offload_to_cpu=on_gpu, rank0_only=True)


def consolidate(cfg: Config, checkpoint: str, ema: Optional[bool] = None) -> dict:
    """Load the sharded ``checkpoint`` into ``cfg``'s model under its FSDP strategy and return the full checkpoint
    (``meta`` and ``state_dict``) on rank 0; the other ranks get ``state_dict == {}``. ``ema``: the EMA average
    (``True``), the trained weights (``False``), or the average where the checkpoint has one (``None``)."""
    if 'FSDP' not in str((cfg.get('strategy') or {}).get('type', '')):
        raise ConfigValueError('the config trains without a sharded (FSDP) strategy, so its checkpoints are single '
                               'files that need no consolidation; give the sharded config the checkpoint was saved by '
                               '(one with strategy=dict(type=\'FSDPStrategy\', ...)).')
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    with tempfile.TemporaryDirectory() as logs:  # the strategy's log directory, and its logger's unique name
        strategy = STRATEGIES.build(dict(cfg.strategy, work_dir=logs, experiment_name=osp.basename(logs),
                                         env_kwargs=dict(cfg.get('env_cfg', {}), launcher='pytorch')))
        model = strategy.prepare(cfg.model, dispatch_kwargs=dict(init_weights_for_test_or_val=False))
        shards = len(glob.glob(osp.join(checkpoint, 'rank*.pth')))
        if shards != get_world_size():
            raise ConfigValueError(f'{checkpoint} holds the shards of {shards} processes, but this run has '
                                   f'{get_world_size()}. Run it with the world size of the run that saved it '
                                   f'(torchrun --nproc_per_node N [--nnodes M], {shards} processes in all).')
        loaded = strategy.load_checkpoint(checkpoint)
    if ema is None:
        ema = CHECKPOINT_KEY in loaded
    print_log(f'{checkpoint}: writing the ' + ('EMA average' if ema else 'trained weights'), logger='current')
    if ema:
        if CHECKPOINT_KEY not in loaded:
            raise ConfigValueError(f'--ema: {checkpoint} has no EMA weights (the run had no ShardedEMAHook); '
                                   'drop --ema to write the trained weights.')
        copy_shards(ema_parameters(model), loaded[CHECKPOINT_KEY]['averages'])
    with FullyShardedDataParallel.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                                  full_state_dict_config(model)):
        return dict(meta=loaded.get('meta', {}), state_dict=model.state_dict())


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    with user_errors_end_in_one_line():
        consolidated = consolidate(read_config(args.config), args.checkpoint, args.ema)
    if is_main_process():
        save_checkpoint(consolidated, args.out)


if __name__ == '__main__':
    main()
    end_distributed_run()
