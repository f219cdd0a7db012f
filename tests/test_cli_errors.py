"""Bad input to the command-line tools ends with a message that says what to change, not a traceback."""
import subprocess
import sys
from pathlib import Path

import pytest
from mmengine.config import Config

from mmcausal.utils import DatasetNotFoundError, check_dataset_paths

ROOT = Path(__file__).resolve().parents[1]
CLS = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
DET = 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-12e_shapes-128px.py'


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('config,loader', [(CLS, 'train_dataloader'), (DET, 'train_dataloader')])
def test_missing_dataset_names_the_path_and_the_fix(config, loader, tmp_path):
    cfg = Config.fromfile(str(ROOT / config))
    cfg[loader].dataset.data_root = str(tmp_path / 'absent')
    with pytest.raises(DatasetNotFoundError, match='absent.*data_root=PATH'):
        check_dataset_paths(cfg, (loader, ))


def test_wrapped_dataset_is_checked(tmp_path):
    cfg = Config(dict(train_dataloader=dict(dataset=dict(
        type='RepeatDataset', times=2, dataset=dict(type='CocoDataset', data_root=str(tmp_path),
                                                    ann_file='annotations/x.json')))))
    with pytest.raises(DatasetNotFoundError, match='annotations/x.json'):
        check_dataset_paths(cfg, ('train_dataloader', ))


def test_train_tool_reports_missing_dataset_without_traceback(tmp_path):
    result = _run('tools/train.py', CLS, '--work-dir', str(tmp_path),
                  '--cfg-options', f'train_dataloader.dataset.data_root={tmp_path}/nothing')
    assert result.returncode != 0
    assert 'does not exist' in result.stderr and 'Traceback' not in result.stderr


@pytest.mark.parametrize('args,message', [
    (['tools/train.py', 'configs/illama/nope.py'], 'config file not found'),
    (['tools/train.py', CLS, '--resume', 'missing.pth'], 'not found'),
    (['tools/test.py', CLS, 'missing.pth'], 'not found'),
])
def test_missing_files_are_reported(args, message):
    result = _run(*args)
    assert result.returncode != 0 and message in result.stderr and 'Traceback' not in result.stderr


def test_missing_pretrained_checkpoint_is_reported_before_training(shapes_root, tmp_path):
    """A fine-tuning config whose MAE checkpoint was never produced names the key to set."""
    result = _run('tools/train.py', 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
                  '--work-dir', str(tmp_path), '--cfg-options',
                  f'train_dataloader.dataset.data_root={shapes_root}/imagenet',
                  f'val_dataloader.dataset.data_root={shapes_root}/imagenet',
                  'model.backbone.init_cfg._delete_=True', 'model.backbone.init_cfg.type=Pretrained',
                  f'model.backbone.init_cfg.checkpoint={tmp_path}/mae.pth',
                  'model.backbone.init_cfg.prefix=backbone.')
    assert result.returncode != 0 and 'Traceback' not in result.stderr, result.stderr[-2000:]
    assert 'model.backbone.init_cfg.checkpoint' in result.stderr and 'mae.pth' in result.stderr


def test_unmergeable_cfg_options_are_reported_without_traceback():
    result = _run('tools/train.py', CLS, '--cfg-options', 'model.backbone.img_size.height=8')
    assert result.returncode != 0 and 'Traceback' not in result.stderr
    assert '--cfg-options could not be merged' in result.stderr
