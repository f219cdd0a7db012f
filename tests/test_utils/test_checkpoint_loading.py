"""Checkpoint safety: every scheme mmengine offers goes through one weights-only loader with an allow-list.

A "malicious" checkpoint here is a real ``torch.save`` file whose pickle calls ``os.system`` / writes a marker
file when unpickled with ``weights_only=False``; every test asserts the marker never appears.
"""
import argparse
import fractions
import functools
import http.server
import os
import pickle
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Iterator, List

import numpy as np
import pytest
import torch
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer
from mmengine.model import BaseModel
from mmengine.runner import CheckpointLoader, Runner, load_checkpoint
from torch import nn
from torch.utils.data import Dataset

import mmcausal  # noqa: F401  (applies the shims)
from foreign_pickles import save_with_config_node
from mmcausal.utils import (
    UNSAFE_LOAD_ENV,
    CheckpointFormatError,
    ForeignObject,
    UnsafeCheckpointError,
    extract_checkpoint_data,
    load_checkpoint_file,
)


class Payload:
    """Unpickling it (without weights_only) creates ``marker``: stands for any code a file could run."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker), ))


def state_dict() -> dict:
    return {'weight': torch.ones(1, 2), 'bias': torch.zeros(1)}


@pytest.fixture
def marker(tmp_path) -> Path:
    return tmp_path / 'payload-ran'


@pytest.fixture
def malicious(tmp_path, marker) -> str:
    path = str(tmp_path / 'malicious.pth')
    torch.save({'state_dict': state_dict(), 'payload': Payload(str(marker))}, path)
    return path


def assert_refused(error: pytest.ExceptionInfo, name: str, marker: Path) -> None:
    message = str(error.value)
    assert '\n' not in message, message  # one line
    assert name in message and 'pathlib' in message and UNSAFE_LOAD_ENV in message
    assert not marker.exists()


# --------------------------------------------------------------------------------------------------
# Every scheme refuses a payload
# --------------------------------------------------------------------------------------------------
def test_local_file_is_refused(malicious, marker):
    for load in (load_checkpoint_file, CheckpointLoader.load_checkpoint,
                 functools.partial(load_checkpoint, nn.Linear(2, 1))):
        with pytest.raises(UnsafeCheckpointError) as error:
            load(malicious)
        assert_refused(error, malicious, marker)


def test_file_url_is_refused_and_a_clean_one_loads(malicious, marker, tmp_path):
    url = Path(malicious).as_uri()
    with pytest.raises(UnsafeCheckpointError) as error:
        CheckpointLoader.load_checkpoint(url)
    assert_refused(error, url, marker)
    clean = tmp_path / 'clean.pth'
    torch.save(state_dict(), clean)
    assert CheckpointLoader.load_checkpoint(clean.as_uri())['weight'].sum() == 2


@pytest.fixture
def http_root(tmp_path, monkeypatch) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 serving ``tmp_path/www``; downloads land in a fresh torch hub dir."""
    www = tmp_path / 'www'
    www.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(torch.hub, '_hub_dir', str(tmp_path / 'hub'))
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}'
    finally:
        server.shutdown()
        server.server_close()


def test_http_url_is_refused(malicious, marker, http_root, tmp_path):
    shutil.copy(malicious, tmp_path / 'www' / 'model.pth')
    url = f'{http_root}/model.pth'
    with pytest.raises(UnsafeCheckpointError) as error:
        CheckpointLoader.load_checkpoint(url)
    assert_refused(error, url, marker)
    assert (tmp_path / 'hub' / 'checkpoints' / 'model.pth').exists()  # downloaded where torch caches


def test_schemes_resolving_to_urls_are_refused(malicious, marker, http_root, tmp_path, monkeypatch):
    """``torchvision://`` / ``open-mmlab://`` / ``mmcls://`` resolve a name to a URL, then load it."""
    from mmengine.runner import checkpoint as checkpoint_module
    shutil.copy(malicious, tmp_path / 'www' / 'resnet.pth')
    table = {'resnet': f'{http_root}/resnet.pth'}
    for getter in ('get_torchvision_models', 'get_external_models', 'get_mmcls_models'):
        monkeypatch.setattr(checkpoint_module, getter, lambda: table)
    monkeypatch.setattr(checkpoint_module, 'get_deprecated_model_names', lambda: {})
    for name in ('torchvision://resnet', 'open-mmlab://resnet', 'mmcls://resnet'):
        with pytest.raises(UnsafeCheckpointError) as error:
            CheckpointLoader.load_checkpoint(name)
        assert_refused(error, table['resnet'], marker)


def test_clean_http_checkpoint_loads(http_root, tmp_path):
    torch.save({'state_dict': state_dict(), 'meta': {'epoch': 1}}, tmp_path / 'www' / 'clean.pth')
    model = nn.Linear(2, 1)
    load_checkpoint(model, f'{http_root}/clean.pth')
    torch.testing.assert_close(model.weight, torch.ones(1, 2))


# --------------------------------------------------------------------------------------------------
# The allow-list and the opt-in
# --------------------------------------------------------------------------------------------------
def test_allowed_classes_load(tmp_path):
    buffer = HistoryBuffer()
    buffer.update(0.5)
    payload = {
        'args': argparse.Namespace(lr=0.1, model='illama_base'),
        'eta': np.float64(3.5), 'seed': np.int64(7), 'array': np.arange(3, dtype=np.float32),
        'dtype': np.dtype('float16'), 'history': buffer, 'state_dict': state_dict(),
    }
    path = tmp_path / 'allowed.pth'
    torch.save(payload, path)
    loaded = load_checkpoint_file(str(path))
    assert loaded['args'].lr == 0.1 and loaded['eta'] == 3.5 and loaded['seed'] == 7
    np.testing.assert_array_equal(loaded['array'], np.arange(3, dtype=np.float32))
    assert loaded['dtype'] == np.float16 and loaded['history'].current() == 0.5


def test_opt_in_names_one_file(tmp_path, monkeypatch):
    """Another class (harmless here) is refused until this very file is listed in the variable."""
    path, other = tmp_path / 'fraction.pth', tmp_path / 'other.pth'
    torch.save({'ratio': fractions.Fraction(1, 3)}, path)
    with pytest.raises(UnsafeCheckpointError, match='fractions.Fraction'):
        load_checkpoint_file(str(path))
    monkeypatch.setenv(UNSAFE_LOAD_ENV, str(other))
    with pytest.raises(UnsafeCheckpointError):
        load_checkpoint_file(str(path))
    monkeypatch.setenv(UNSAFE_LOAD_ENV, os.pathsep.join([str(other), str(tmp_path / '.' / 'fraction.pth')]))
    assert CheckpointLoader.load_checkpoint(str(path))['ratio'] == fractions.Fraction(1, 3)


def test_torch_load_default_is_untouched(malicious, marker):
    with pytest.raises(pickle.UnpicklingError):
        torch.load(malicious)
    with pytest.raises(pickle.UnpicklingError):  # our allow-list is scoped to our loader
        torch.load(_save_tmp({'args': argparse.Namespace(a=1)}, Path(malicious).parent))
    assert not marker.exists()


def _save_tmp(obj, directory: Path) -> str:
    path = str(directory / 'tmp.pth')
    torch.save(obj, path)
    return path


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


# --------------------------------------------------------------------------------------------------
# Converters: take the weights out of foreign files without running them
# --------------------------------------------------------------------------------------------------
def test_extraction_replaces_foreign_objects_and_runs_nothing(malicious, marker, tmp_path):
    data, foreign = extract_checkpoint_data(malicious)
    assert 'pathlib.PosixPath' in foreign
    torch.testing.assert_close(data['state_dict']['weight'], torch.ones(1, 2))
    assert isinstance(data['payload'], ForeignObject) and not marker.exists()


def test_extraction_keeps_a_config_node_as_data(tmp_path):
    """The official De-focus files pickle a yacs ``CfgNode`` (a dict subclass) next to the weights."""
    path = tmp_path / 'defocus.pth'
    save_with_config_node({'model': state_dict()}, path, config=dict(MODEL=dict(NAME='defocus_mamba')))
    with pytest.raises(UnsafeCheckpointError, match='fake_yacs_config.CfgNode'):
        load_checkpoint_file(path)
    data, foreign = extract_checkpoint_data(path)
    assert foreign == ['fake_yacs_config.CfgNode']
    assert data['config']['MODEL']['NAME'] == 'defocus_mamba'
    torch.testing.assert_close(data['model']['weight'], torch.ones(1, 2))


# --------------------------------------------------------------------------------------------------
# Runner checkpoints: no per-machine state; a copy in a fresh directory and HOME resumes
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
    return Runner(
        model=ToyModel(), work_dir=work_dir, experiment_name=name,
        train_dataloader=dict(dataset=ToyDataset(), sampler=dict(type='DefaultSampler', shuffle=False),
                              collate_fn=dict(type='default_collate'), batch_size=4, num_workers=0),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        param_scheduler=dict(type='MultiStepLR', milestones=[1], gamma=0.5, by_epoch=True),
        train_cfg=dict(by_epoch=True, max_epochs=2),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=1)),
        custom_hooks=[IterRecorder()] + ([InterruptAfterFirstEpoch()] if interrupt else []), resume=resume,
        randomness=dict(seed=0))


def test_runner_checkpoint_copied_to_a_fresh_home_resumes(tmp_path, monkeypatch):
    straight = build_runner(str(tmp_path / 'straight'), 'straight')
    straight.train()
    with pytest.raises(Interrupted):
        build_runner(str(tmp_path / 'first'), 'first', interrupt=True).train()

    fresh = tmp_path / 'container'
    (fresh / 'work').mkdir(parents=True)
    shutil.copy(tmp_path / 'first' / 'epoch_1.pth', fresh / 'work' / 'epoch_1.pth')
    (fresh / 'work' / 'last_checkpoint').write_text(str(fresh / 'work' / 'epoch_1.pth'))
    monkeypatch.setenv('HOME', str(fresh / 'home'))
    with pytest.raises(pickle.UnpicklingError):  # it really holds more than tensors (HistoryBuffer)
        torch.load(fresh / 'work' / 'epoch_1.pth', weights_only=True)

    # a fresh process (no HistoryBuffer built yet, nothing cached) loads it too
    script = ('import sys, mmcausal; from mmengine.runner import CheckpointLoader; '
              "print(sorted(CheckpointLoader.load_checkpoint(sys.argv[1])))")
    result = subprocess.run([sys.executable, '-c', script, str(fresh / 'work' / 'epoch_1.pth')],
                            capture_output=True, text=True, timeout=120, env=dict(os.environ, HOME=str(fresh / 'home')))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "'message_hub'" in result.stdout

    resumed = build_runner(str(fresh / 'work'), 'resumed', resume=True)
    resumed.train()
    recorder = next(hook for hook in resumed.hooks if isinstance(hook, IterRecorder))
    assert recorder.iters == [2, 3]  # only the second epoch was trained
    for resumed_param, straight_param in zip(resumed.model.parameters(), straight.model.parameters()):
        torch.testing.assert_close(resumed_param, straight_param, rtol=0, atol=0)
    assert not list((fresh / 'home').rglob('*mmcausal*'))  # nothing recorded per machine


# --------------------------------------------------------------------------------------------------
# The allow-list is what real checkpoints of our configs hold, no more
# --------------------------------------------------------------------------------------------------
TWINS = {
    'illama/illama-nano-p8_1xb32-30e_shapes-64px.py': 'epoch',
    'vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py': 'epoch',
    'illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py': 'iter',
    'vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-36e_shapes-128px.py': 'iter',
}


def _short_run_options(schedule: str, has_val: bool) -> dict:
    options = {'train_dataloader.dataset.indices': 8, 'default_hooks.checkpoint.max_keep_ckpts': -1}
    if schedule == 'epoch':
        options.update({'train_cfg.max_epochs': 2, 'default_hooks.checkpoint.interval': 1})
        if has_val:
            options.update({'train_cfg.val_interval': 1, 'val_dataloader.dataset.indices': 4})
    else:
        options.update({'train_cfg.max_iters': 4, 'train_cfg.val_interval': 2,
                        'default_hooks.checkpoint.interval': 2, 'val_dataloader.dataset.indices': 4,
                        'param_scheduler': [dict(type='ConstantLR', factor=1.0, by_epoch=False)]})
    return options


@pytest.mark.e2e
@pytest.mark.parametrize('config', sorted(TWINS))
def test_real_checkpoints_need_exactly_the_allow_list(config, shapes_root, tmp_path, single_thread):
    """Train each kind of twin briefly (with validation, so metrics enter the message hub), save, and
    check every global of the saved checkpoints is torch's or on the allow-list."""
    from e2e_utils import load_config
    from mmcausal.utils import allowed_global_names
    is_mae = config.startswith('vision_llama/mae')
    cfg = load_config(config, shapes_root, tmp_path, **_short_run_options(TWINS[config], not is_mae))
    Runner.from_cfg(cfg).train()

    allowed = allowed_global_names()
    checkpoints = sorted(tmp_path.glob('*.pth'))
    assert len(checkpoints) == 2
    for path in checkpoints:
        needed = set(torch.serialization.get_unsafe_globals_in_checkpoint(str(path)))
        assert needed <= allowed, f'{path.name} also needs {needed - allowed}'
        assert 'mmengine.logging.history_buffer.HistoryBuffer' in needed
        checkpoint = CheckpointLoader.load_checkpoint(str(path))
        assert set(checkpoint) >= {'meta', 'state_dict', 'message_hub', 'optimizer'}
