"""illama2mmcausal: official checkpoint -> mmcausal checkpoint with identical logits."""
import argparse
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmcausal.converters import convert_illama
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers.mask_mode import decode_mask_mode
from mmcausal.registry import MODELS
from reference.official_illama import OfficialILLaMA
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / 'configs/illama/illama-tiny-p16_32xb128_in1k.py'
CONVERTER = ROOT / 'tools/model_converters/illama2mmcausal.py'


@pytest.fixture(scope='module')
def official():
    torch.manual_seed(0)
    model = OfficialILLaMA(img_size=224, dim=192, depth=12, heads=3, num_classes=1000).eval()
    with torch.no_grad():  # non-trivial norms and biases so a wrong mapping cannot hide
        for name, param in model.named_parameters():
            if name.endswith('bias') or 'norm' in name:
                param.add_(torch.randn_like(param) * 0.1)
    return model


def _build_from_config():
    cfg = Config.fromfile(str(CONFIG))
    init_default_scope('mmpretrain')
    return MODELS.build(cfg.model).eval()


def _convert_with_cli(src: Path, dst: Path, *extra: str) -> subprocess.CompletedProcess:
    return run_python([sys.executable, str(CONVERTER), str(src), str(dst), *extra], cwd=ROOT, timeout=300)


@pytest.mark.parametrize('alpha', [0.0, 0.5])
def test_converted_checkpoint_loads_strictly_and_matches_official_logits(official, tmp_path, alpha):
    src, dst = tmp_path / 'illama_tiny.pth', tmp_path / 'converted.pth'
    torch.save({'model': official.state_dict()}, src)
    result = _convert_with_cli(src, dst)
    assert result.returncode == 0, result.stderr

    model = _build_from_config()
    checkpoint = torch.load(dst, weights_only=True)
    model.load_state_dict(checkpoint['state_dict'], strict=True)
    model.backbone.soft_mask_rate = alpha
    official.soft_mask_rate = alpha
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = official(images)
        logits = model(images, mode='tensor')
    assert (logits - expected).abs().max().item() < 1e-4


def test_flat_checkpoint_and_key_mapping(official):
    converted = convert_illama(official.state_dict())
    assert 'backbone.layers.3.ffn.w12.weight' in converted
    w12 = converted['backbone.layers.3.ffn.w12.weight']
    torch.testing.assert_close(w12[:512], official.blocks[3].mlp.fc1.weight)
    torch.testing.assert_close(w12[512:], official.blocks[3].mlp.fc3.weight)
    torch.testing.assert_close(converted['head.fc.weight'], official.head.weight)
    torch.testing.assert_close(converted['backbone.patch_embed.projection.bias'], official.patch_embed.proj.bias)


def test_converted_checkpoint_records_the_official_mask_mode(official):
    """The released weights were trained with the post-softmax soft mask: a causal model must say so."""
    converted = convert_illama(official.state_dict())
    assert decode_mask_mode(converted['backbone.mask_mode']) == 'official'
    backbone = {key[len('backbone.'):]: value for key, value in converted.items() if key.startswith('backbone.')}
    causal = ILLaMA(arch='tiny', mask_mode='causal')
    with pytest.warns(UserWarning, match="trained with mask_mode='official'"):
        causal.load_state_dict(backbone, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ILLaMA(arch='tiny', mask_mode='official').load_state_dict(backbone, strict=True)


def test_unknown_key_is_rejected():
    with pytest.raises(KeyError, match='official iLLaMA'):
        convert_illama({'blocks.0.attn.relative_position_bias_table': torch.zeros(1)})


def test_training_checkpoint_converts_without_running_its_pickles(official, tmp_path):
    """Official training files pickle ``args`` (allowed) and may hold anything else: it is never run."""
    marker = tmp_path / 'payload-ran'

    class Payload:

        def __reduce__(self):
            return (Path.touch, (marker, ))

    src, dst = tmp_path / 'checkpoint-299.pth', tmp_path / 'converted.pth'
    torch.save({'model': official.state_dict(), 'epoch': 299, 'args': argparse.Namespace(lr=4e-3),
                'scaler': Payload()}, src)
    result = _convert_with_cli(src, dst)
    assert result.returncode == 0, result.stderr
    assert 'pathlib' in result.stdout and not marker.exists()
    assert torch.load(dst, weights_only=True)['state_dict'].keys() == convert_illama(official.state_dict()).keys()


def test_missing_source_is_a_clear_error(tmp_path):
    result = _convert_with_cli(tmp_path / 'nope.pth', tmp_path / 'out.pth')
    assert result.returncode != 0 and 'does not exist' in result.stderr


@pytest.mark.e2e
def test_converted_checkpoint_runs_through_the_test_tool(shapes_root, tmp_path):
    """A converted file is a plain tensor checkpoint: tools/test.py loads it (weights_only) and evaluates."""
    torch.manual_seed(0)
    official = OfficialILLaMA(img_size=64, patch=8, dim=64, depth=4, heads=2, num_classes=4)
    src, dst = tmp_path / 'official_nano.pth', tmp_path / 'nano.pth'
    torch.save(official.state_dict(), src)  # flat, as the released files may be
    assert _convert_with_cli(src, dst).returncode == 0
    data_root = shapes_root / 'imagenet'
    result = run_python(
        [sys.executable, 'tools/test.py', 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py', str(dst),
         '--work-dir', str(tmp_path / 'work'), '--cfg-options', f'test_dataloader.dataset.data_root={data_root}'],
        cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert 'accuracy/top1' in log
    assert 'do not match exactly' not in log  # mmengine's warning for missing/unexpected keys
