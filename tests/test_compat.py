"""Tests for mmcausal.compat (shims for the pinned stack) and mmcausal.utils.checkpoint_trust."""
import argparse
import os
import os.path as osp
import pickle
import socket
import subprocess
import sys
import zipfile
from typing import List

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import CheckpointLoader, Runner, load_checkpoint
from torch import nn
from torch.utils.data import Dataset

import mmcausal  # noqa: F401  (applies the shims)
from mmcausal.utils import (CheckpointFormatError, UntrustedCheckpointError, is_trusted,
                            load_checkpoint_file, trust_checkpoint, trust_store_path)

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


@pytest.fixture(autouse=True)
def trust_home(tmp_path, monkeypatch) -> str:
    """Keep the trust store inside the test's tmp dir."""
    home = str(tmp_path / 'mmcausal_home')
    monkeypatch.setenv('MMCAUSAL_HOME', home)
    return home


# --------------------------------------------------------------------------------------------------
# Runner-written checkpoints are trusted: train 1 epoch, resume to 2 == train 2 epochs straight
# --------------------------------------------------------------------------------------------------
class ToyModel(BaseModel):

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1)
        with torch.no_grad():
            self.linear.weight.copy_(torch.tensor([[0.5, -0.3]]))
            self.linear.bias.fill_(0.1)

    def forward(self, inputs: torch.Tensor, labels: torch.Tensor, mode: str = 'tensor'):
        outputs = self.linear(inputs)
        if mode == 'loss':
            return dict(loss=((outputs - labels)**2).mean())
        return outputs


class ToyDataset(Dataset):
    inputs = torch.linspace(-1, 1, 16).reshape(8, 2)
    labels = inputs.sum(dim=1, keepdim=True) * 0.7 - 0.2

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int) -> dict:
        return dict(inputs=self.inputs[index], labels=self.labels[index])


class IterRecorder(Hook):
    """Records the global iteration index of every trained iteration."""

    def __init__(self) -> None:
        self.iters: List[int] = []

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        self.iters.append(runner.iter)


class Interrupted(Exception):
    pass


class InterruptAfterFirstEpoch(Hook):
    """Simulates a crash right after the first epoch's checkpoint was written."""
    priority = 'LOWEST'  # after CheckpointHook (VERY_LOW)

    def after_train_epoch(self, runner) -> None:
        if runner.epoch == 0:
            raise Interrupted


def build_runner(work_dir: str, name: str, resume: bool = False, interrupt: bool = False) -> Runner:
    hooks = [IterRecorder()] + ([InterruptAfterFirstEpoch()] if interrupt else [])
    return Runner(
        model=ToyModel(),
        work_dir=work_dir,
        experiment_name=name,
        train_dataloader=dict(
            dataset=ToyDataset(),
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate'),
            batch_size=4,
            num_workers=0),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        param_scheduler=dict(type='MultiStepLR', milestones=[1], gamma=0.5, by_epoch=True),
        train_cfg=dict(by_epoch=True, max_epochs=2),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
        custom_hooks=hooks,
        resume=resume,
        randomness=dict(seed=0),
    )


def test_runner_resumes_from_its_own_checkpoint(tmp_path):
    straight = build_runner(str(tmp_path / 'straight'), name='straight')
    straight.train()

    interrupted_dir = str(tmp_path / 'interrupted')
    with pytest.raises(Interrupted):
        build_runner(interrupted_dir, name='interrupted', interrupt=True).train()
    first_ckpt = osp.join(interrupted_dir, 'epoch_1.pth')
    assert is_trusted(first_ckpt)
    with pytest.raises(pickle.UnpicklingError):  # it really needs full unpickling (HistoryBuffer)
        torch.load(first_ckpt, weights_only=True)

    resumed = build_runner(interrupted_dir, name='resumed', resume=True)
    resumed.train()

    recorder = next(hook for hook in resumed.hooks if isinstance(hook, IterRecorder))
    assert recorder.iters == [2, 3]  # only the second epoch was trained
    assert (resumed.epoch, resumed.iter) == (straight.epoch, straight.iter) == (2, 4)
    for resumed_param, straight_param in zip(resumed.model.parameters(), straight.model.parameters()):
        torch.testing.assert_close(resumed_param, straight_param)


# --------------------------------------------------------------------------------------------------
# Foreign files: weights-only unless explicitly trusted
# --------------------------------------------------------------------------------------------------
def state_dict() -> dict:
    return {'weight': torch.ones(1, 2), 'bias': torch.zeros(1)}


@pytest.fixture
def foreign_ckpt(tmp_path) -> str:
    """A checkpoint that pickles a non-tensor object, as many research repositories publish."""
    path = str(tmp_path / 'foreign.pth')
    torch.save({'state_dict': state_dict(), 'args': argparse.Namespace(lr=0.1)}, path)
    return path


def assert_refused(error: pytest.ExceptionInfo, path: str) -> None:
    message = str(error.value)
    assert 'tools/misc/trust_checkpoint.py' in message and path in message
    assert 'argparse.Namespace' in message  # torch's reason is quoted


def test_foreign_checkpoint_is_refused(foreign_ckpt):
    with pytest.raises(UntrustedCheckpointError) as error:
        load_checkpoint_file(foreign_ckpt)
    assert_refused(error, foreign_ckpt)
    with pytest.raises(UntrustedCheckpointError) as error:
        CheckpointLoader.load_checkpoint(foreign_ckpt)
    assert_refused(error, foreign_ckpt)
    with pytest.raises(UntrustedCheckpointError) as error:
        load_checkpoint(nn.Linear(2, 1), foreign_ckpt)
    assert_refused(error, foreign_ckpt)
    assert not osp.exists(trust_store_path())


def test_trust_flag_loads_without_recording(foreign_ckpt):
    checkpoint = load_checkpoint_file(foreign_ckpt, map_location='cpu', trust=True)
    assert checkpoint['args'].lr == 0.1
    assert not is_trusted(foreign_ckpt)


def test_trusted_foreign_checkpoint_loads(foreign_ckpt):
    digest = trust_checkpoint(foreign_ckpt)
    assert is_trusted(foreign_ckpt)
    with open(trust_store_path()) as store:
        assert store.read() == f'{digest} {foreign_ckpt}\n'
    assert load_checkpoint_file(foreign_ckpt)['args'].lr == 0.1
    model = nn.Linear(2, 1)
    load_checkpoint(model, foreign_ckpt)
    torch.testing.assert_close(model.weight, torch.ones(1, 2))


def test_trust_is_recorded_once(foreign_ckpt):
    trust_checkpoint(foreign_ckpt)
    trust_checkpoint(foreign_ckpt)
    with open(trust_store_path()) as store:
        assert len(store.readlines()) == 1


def test_tensor_only_checkpoint_needs_no_trust(tmp_path):
    path = str(tmp_path / 'weights.pth')
    torch.save({'state_dict': state_dict(), 'meta': {'epoch': 3, 'classes': ('a', 'b')}}, path)
    assert load_checkpoint_file(path)['meta']['epoch'] == 3
    model = nn.Linear(2, 1)
    load_checkpoint(model, path)
    torch.testing.assert_close(model.weight, torch.ones(1, 2))
    assert not osp.exists(trust_store_path())


def test_changed_content_is_untrusted(foreign_ckpt):
    trust_checkpoint(foreign_ckpt)
    with open(foreign_ckpt, 'r+b') as file:  # flip one byte
        file.seek(-1, os.SEEK_END)
        last = file.read(1)
        file.seek(-1, os.SEEK_END)
        file.write(bytes([last[0] ^ 0xFF]))
    assert not is_trusted(foreign_ckpt)

    torch.save({'state_dict': state_dict(), 'args': argparse.Namespace(lr=0.2)}, foreign_ckpt)
    assert not is_trusted(foreign_ckpt)
    with pytest.raises(UntrustedCheckpointError):
        load_checkpoint_file(foreign_ckpt)


def test_torch_load_default_is_untouched(foreign_ckpt):
    trust_checkpoint(foreign_ckpt)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(foreign_ckpt)


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(FileNotFoundError, match='not found'):
        load_checkpoint_file(str(tmp_path / 'missing.pth'))
    text = tmp_path / 'notes.pth'
    text.write_text('not a checkpoint\n')
    archive = tmp_path / 'archive.pth'
    with zipfile.ZipFile(archive, 'w') as zf:
        zf.writestr('readme.txt', 'hello')
    for path in (text, archive):
        with pytest.raises(CheckpointFormatError, match='not a PyTorch checkpoint'):
            load_checkpoint_file(str(path))


def test_trust_cli(foreign_ckpt):
    result = subprocess.run(
        [sys.executable, osp.join(REPO_ROOT, 'tools', 'misc', 'trust_checkpoint.py'), foreign_ckpt],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONPATH=REPO_ROOT))
    assert result.returncode == 0, result.stderr
    assert is_trusted(foreign_ckpt)


# --------------------------------------------------------------------------------------------------
# Config parser
# --------------------------------------------------------------------------------------------------
def test_stdlib_modules_are_builtin():
    from mmengine.config import config as config_module
    from mmengine.config import utils as config_utils
    for is_builtin in (config_utils._is_builtin_module, config_module._is_builtin_module):
        assert is_builtin('os') and is_builtin('math') and is_builtin('os.path')
        assert not is_builtin('numpy') and not is_builtin('mmengine.runner')


def test_old_style_config_with_import_before_base(tmp_path):
    (tmp_path / 'base.py').write_text('a = 1\n')
    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text("import os\n_base_ = ['./base.py']\nb = os.path.join('x', 'y')\n")
    cfg = Config.fromfile(str(cfg_file))
    assert cfg.a == 1 and cfg.b == osp.join('x', 'y')


def test_package_base_config_without_pkg_resources(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'pkg_resources', None)  # any import of it now fails
    cfg_file = tmp_path / 'cfg.py'
    cfg_file.write_text("_base_ = ['mmseg::_base_/default_runtime.py']\n")
    cfg = Config.fromfile(str(cfg_file))
    assert cfg.default_scope == 'mmseg'


# --------------------------------------------------------------------------------------------------
# Distributed on CPU: init_dist('pytorch', backend='nccl') -> gloo; DDP wraps a CPU module
# --------------------------------------------------------------------------------------------------
GLOO_SCRIPT = """
import warnings
import torch
import torch.distributed as dist
import mmcausal  # noqa: F401
from mmengine.dist import init_dist
from mmengine.model import MMDistributedDataParallel
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    init_dist('pytorch', backend='nccl')
print('backend', dist.get_backend())
print('warned', any('gloo' in str(w.message) for w in caught))
model = MMDistributedDataParallel(torch.nn.Linear(2, 1), device_ids=[0])
out = model(torch.ones(3, 2)).sum()
out.backward()
print('ddp_ok', tuple(out.shape))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_init_dist_uses_gloo_on_cpu():
    env = dict(os.environ, RANK='0', WORLD_SIZE='1', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1',
               MASTER_PORT=str(free_port()), CUDA_VISIBLE_DEVICES='', PYTHONPATH=REPO_ROOT)
    result = subprocess.run([sys.executable, '-c', GLOO_SCRIPT], capture_output=True, text=True,
                            timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'backend gloo' in result.stdout
    assert 'warned True' in result.stdout
    assert 'ddp_ok ()' in result.stdout
