"""Command-line entry points: multi-process CPU training (torchrun + gloo) and the libraries' own tools."""
import importlib.util
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from e2e_utils import data_options, run_command
from mmcausal.utils import load_checkpoint_file

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(importlib.util.find_spec('mmdet').origin).parents[1]  # site-packages
CLS = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
SEG = 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py'
DET = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-12e_shapes-128px.py'
PYRAMID = 'configs/pyramid_vision_llama'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_two_process_torchrun_on_cpu_with_gloo_resumes_elsewhere(shapes_root, tmp_path):
    """Two gloo ranks train 2 epochs; a second job trains 1 epoch, its checkpoint is copied into a fresh
    work dir with a fresh HOME (a requeued job in a new container) and resumed to epoch 2."""
    def dist_train(work_dir, epochs, *extra, **env):
        return run_command([
            'bash', 'tools/dist_train.sh', CLS, '2', '--work-dir', str(work_dir), *extra, '--cfg-options',
            f'train_cfg.max_epochs={epochs}', 'train_cfg.val_interval=2', 'default_hooks.checkpoint.interval=1',
            *data_options(shapes_root, 'imagenet')
        ], PYTHON=sys.executable, PORT=str(_free_port()), **env)

    result = dist_train(tmp_path / 'straight', 2)
    log = result.stdout + result.stderr
    assert 'Distributed training: True' in log
    assert 'gloo' in log.lower()
    assert 'accuracy/top1' in log

    dist_train(tmp_path / 'first', 1)
    container = tmp_path / 'container'
    (container / 'work').mkdir(parents=True)
    (container / 'home').mkdir()
    shutil.copy(tmp_path / 'first' / 'epoch_1.pth', container / 'work' / 'epoch_1.pth')
    result = dist_train(container / 'work', 2, '--resume', str(container / 'work' / 'epoch_1.pth'),
                        HOME=str(container / 'home'))
    assert 'resumed epoch: 1' in result.stdout + result.stderr
    straight = load_checkpoint_file(str(tmp_path / 'straight' / 'epoch_2.pth'))['state_dict']
    resumed = load_checkpoint_file(str(container / 'work' / 'epoch_2.pth'))['state_dict']
    for name, value in straight.items():
        torch.testing.assert_close(resumed[name], value, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize('library,config,options', [
    ('mmpretrain', CLS, ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', SEG, ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
    ('mmdet', DET, ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_dataloader.dataset.data_root=SHAPES/imagenet']),
    ('mmpretrain', 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', f'{PYRAMID}/pyramid-vision-llama-nano_1xb32-30e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', f'{PYRAMID}/upernet_pyramid-vision-llama-nano_1xb8-400i_shapes-64x64.py',
     ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
    ('mmdet', f'{PYRAMID}/mask-rcnn_pyramid-vision-llama-nano_fpn_1xb4-12e_shapes-128px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmdet', 'configs/defocus/dino-4scale_defocus-mamba-nano-p16_sfp_1xb4-10e_shapes-128px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmpretrain', 'configs/cait/cait-nano-p16_1xb16-30e_shapes-64px.py',
     ['train_cfg.max_epochs=1', 'train_cfg.val_interval=1']),
    ('mmseg', 'configs/cait/upernet_cait-nano-p8_1xb8-250i_shapes-64x64.py',
     ['train_cfg.max_iters=10', 'train_cfg.val_interval=10']),
])
def test_upstream_train_tools_run_our_configs(shapes_root, tmp_path, library, config, options):
    kind = {'mmpretrain': 'imagenet', 'mmseg': 'ade20k', 'mmdet': 'coco'}[library]
    tool = SITE / library / '.mim' / 'tools' / 'train.py'
    data = [] if any('SHAPES' in option for option in options) else data_options(shapes_root, kind)
    options = [option.replace('SHAPES', str(shapes_root)) for option in options]
    run_command([sys.executable, str(tool), config, '--work-dir', str(tmp_path), '--cfg-options', *options, *data])


def test_backbone_memory_tool_measures_each_size_in_its_own_process():
    config = 'configs/vision_llama/vitdet_mask-rcnn_vision-llama-nano-p16_sfp_1xb4-12e_shapes-128px.py'
    result = subprocess.run([sys.executable, 'tools/analysis_tools/backbone_memory.py', config, '--sizes', '64', '128'],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split() for line in result.stdout.strip().splitlines()[1:]]
    assert [row[0] for row in rows] == ['64', '128'] and float(rows[1][1]) == 4.0
    assert all(float(row[2]) > 0 for row in rows)


def test_benchmark_tool_puts_configs_side_by_side_each_in_its_own_process():
    cait = 'configs/cait/cait-nano-p16_1xb16-30e_shapes-64px.py'
    result = subprocess.run([sys.executable, 'tools/analysis_tools/benchmark.py', cait,
                             f'{cait}+model.backbone.attn_impl=explicit', '--sizes', '64', '--backbone-only', '--train',
                             '--repeats', '1'], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.strip('|').split('|') for line in result.stdout.strip().splitlines()[2:]]
    assert [row[0].strip() for row in rows] == [f'`{cait}`', f'`{cait}+model.backbone.attn_impl=explicit`']
    assert rows[0][2] == rows[1][2]  # same parameters: only the attention path differs
    assert float(rows[0][7]) == 1.0 and all(float(row[5]) > 0 and float(row[3]) > 0 for row in rows)
