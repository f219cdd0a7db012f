"""One process of the sharded-training test (``tests/test_engine/test_sharded_training.py``), launched by torchrun.

    torchrun --standalone --nproc_per_node 2 tests/sharded_run.py CONFIG WORK_DIR

Through the command-line tools, as a user runs them: ``tools/train.py`` trains CONFIG (a sharded config, saving
sharded checkpoints at iterations 2 and 4); a second run resumes from a copy of the iteration-2 checkpoint with
``--resume`` and must end exactly as the first: every rank compares its shards of the weights, optimizer states and
EMA, and the logged losses, learning rates and gradient norms. Then ``tools/test.py`` evaluates the sharded
checkpoint, and ``consolidate_sharded_checkpoint.py`` turns the last checkpoints into regular files that load into the
unsharded model. Any failed check ends the process with an error (and torchrun with a non-zero status).
"""
import importlib.util
import json
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List

import torch
import torch.distributed as dist
from mmengine.config import Config
from mmengine.logging import MessageHub

ROOT = Path(__file__).resolve().parents[1]
LOGGED = ('train/loss', 'train/lr', 'train/base_lr', 'train/grad_norm', 'train/drop_path_rate')
NOT_COMPARED = ('meta', 'message_hub')  # times and dates


def tool(relative_path: str) -> ModuleType:
    """A script of ``tools/`` as a module (``tools`` is no package, and ``test`` would be the standard library's)."""
    spec = importlib.util.spec_from_file_location(f'tool_{Path(relative_path).stem}', ROOT / relative_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def logged() -> Dict[str, List[float]]:
    """The training scalars of the run that ended last (its message hub is the current one)."""
    hub = MessageHub.get_current_instance()
    return {key: [float(value) for value in hub.get_scalar(key).data[0]] for key in LOGGED}


def local_data(value: Any) -> Any:
    """This rank's shards of a sharded tensor (none where the rank holds none of it); other values unchanged."""
    return [shard.tensor for shard in value.local_shards()] if type(value).__name__ == 'ShardedTensor' else value


def assert_identical(left: Any, right: Any, where: str) -> None:
    """``left == right``, tensors bit for bit (a sharded tensor: this rank's shard)."""
    left, right = local_data(left), local_data(right)
    if isinstance(left, torch.Tensor):
        torch.testing.assert_close(left, right, rtol=0, atol=0, msg=where)
    elif isinstance(left, dict):
        assert left.keys() == right.keys(), where
        for key in left:
            assert_identical(left[key], right[key], f'{where}.{key}')
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right), where
        for index, (a, b) in enumerate(zip(left, right)):
            assert_identical(a, b, f'{where}[{index}]')
    else:
        assert left == right, f'{where}: {left!r} != {right!r}'


def check_rank_files(reference: Path, resumed: Path) -> None:
    """This rank's files of two sharded checkpoints hold the same state; the safe loader reads them."""
    from mmcausal.utils import allowed_global_names, load_checkpoint_file
    name = f'rank{dist.get_rank()}.pth'
    needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(reference / name)))
    assert needed <= allowed_global_names(), f'the loader refuses {needed - allowed_global_names()}'
    first, second = load_checkpoint_file(str(reference / name)), load_checkpoint_file(str(resumed / name))
    assert {'state_dict', 'optimizer', 'param_schedulers', 'ema_shards'} <= first.keys()
    assert any(type(value).__name__ == 'ShardedTensor' for value in first['state_dict'].values())  # sharded
    for key in first.keys() - set(NOT_COMPARED):
        assert_identical(first[key], second[key], key)


def check_consolidated(cfg: Config, files: Dict[str, Path]) -> None:
    """The consolidated checkpoints load into the unsharded model; the EMA ones of both runs agree."""
    from mmengine.registry import MODELS, init_default_scope

    from mmcausal.utils import load_checkpoint_file
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    weights = {name: load_checkpoint_file(str(path))['state_dict'] for name, path in files.items()}
    for state_dict in weights.values():
        model.load_state_dict(state_dict, strict=True)
    assert_identical(weights['reference_ema'], weights['resumed_ema'], 'consolidated EMA')
    trained, averaged = weights['reference'], weights['reference_ema']
    assert any(not torch.equal(trained[key], averaged[key]) for key in trained)  # --no-ema: the trained weights


def main(config: str, work_dir: Path) -> None:
    train, test, consolidate = (tool(path) for path in (
        'tools/train.py', 'tools/test.py', 'tools/model_converters/consolidate_sharded_checkpoint.py'))
    reference, resumed = work_dir / 'reference', work_dir / 'resumed'
    train.main([config, '--launcher', 'pytorch', '--work-dir', str(reference)])
    reference_log = logged()
    if dist.get_rank() == 0:  # a requeued job: a fresh work dir with a copy of the checkpoint
        shutil.copytree(reference / 'iter_2.pth', resumed / 'iter_2.pth')
    dist.barrier()
    train.main([config, '--launcher', 'pytorch', '--work-dir', str(resumed), '--resume', str(resumed / 'iter_2.pth')])
    assert logged() == reference_log, (logged(), reference_log)
    norms: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(norms, reference_log['train/grad_norm'])
    assert all(rank_norms == norms[0] for rank_norms in norms), f'gradient norms differ between ranks: {norms}'
    check_rank_files(reference / 'iter_4.pth', resumed / 'iter_4.pth')

    test.main([config, str(resumed / 'iter_4.pth'), '--launcher', 'pytorch', '--work-dir', str(work_dir / 'test')])
    accuracy = MessageHub.get_current_instance().get_scalar('test/accuracy/top1').current()

    files = {}
    # the reference's average by default (the run kept one), the resumed run's with --ema: equal
    for run, ema, flags in ((reference, False, ['--no-ema']), (reference, True, []), (resumed, True, ['--ema'])):
        name = run.name + '_ema' * ema
        files[name] = work_dir / f'{name}.pth'
        consolidate.main([config, str(run / 'iter_4.pth'), str(files[name])] + flags)
    if dist.get_rank() == 0:
        check_consolidated(Config.fromfile(config), files)
        (work_dir / 'result.json').write_text(json.dumps(dict(log=reference_log, test_accuracy=accuracy)))
    # the ranks end together: rank 1 destroying its gloo group while rank 0 still checks the files can abort it
    # (SIGABRT, "terminate called without an active exception")
    dist.barrier()


if __name__ == '__main__':
    from mmcausal.utils import end_distributed_run
    main(sys.argv[1], Path(sys.argv[2]))
    end_distributed_run()  # as the tools end when run as scripts
