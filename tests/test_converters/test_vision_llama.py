"""visionllama2mmcausal: official MAE checkpoint (mmengine) -> mmcausal checkpoint with identical features.

The official model is :mod:`reference.official_visionllama`, an independent re-statement of the official
mmpretrain ``VisionLLaMA`` / ViTDet ``LLaMADET`` forward (complex-number RoPE, official parameter names).
"""
import logging
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.registry import init_default_scope
from mmengine.runner.checkpoint import _load_checkpoint_with_prefix

from mmcausal.converters import convert_visionllama_mae, describe_visionllama_mae, format_architecture
from mmcausal.models.vision_llama import VisionLLaMA
from mmcausal.registry import MODELS
from reference.official_visionllama import OfficialLLaMADET, OfficialVisionLLaMA, randomize_
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/visionllama2mmcausal.py'
FINETUNE_CONFIG = ROOT / 'configs/vision_llama/vision-llama-base-p16_8xb128-coslr-100e_in1k.py'
MAE_NANO_CONFIG = ROOT / 'configs/vision_llama/mae_vision-llama-nano-p8_1xb32-20e_shapes-64px.py'
TOLERANCE = 1e-4  # max abs difference of fp32 feature maps
UNUSED_BY_FINETUNING = {'cls_token', 'norm.weight', 'norm.bias'}  # with_cls_token=False, final_norm=False
UNUSED_BY_FEATMAP = UNUSED_BY_FINETUNING | {'pool_norm.weight', 'pool_norm.bias'}  # dense backbones: no GAP norm
FAKE_DECODER = {'neck.mask_token': (1, 1, 32), 'neck.decoder_embed.weight': (32, 64),
                'neck.decoder_embed.bias': (32, ), 'neck.ln1.weight': (32, )}


def _official(seed=0, **kwargs):
    torch.manual_seed(seed)
    return randomize_(OfficialVisionLLaMA(**kwargs).eval(), seed=seed)


def _mmengine_checkpoint(official, decoder=None):
    """What the official MAE pre-training writes: ``{'meta', 'state_dict'}`` with ``backbone.``/``neck.`` keys."""
    state_dict = {f'backbone.{k}': v for k, v in official.state_dict().items()}
    if decoder is None:
        decoder = {key: torch.randn(shape) for key, shape in FAKE_DECODER.items()}
    state_dict.update(decoder)
    return {'meta': {'epoch': 800, 'iter': 250200, 'mmengine_version': '0.10.3'}, 'state_dict': state_dict}


def _convert_with_cli(src: Path, dst: Path, *extra: str) -> subprocess.CompletedProcess:
    """The tool as a separate process (exit status, stderr)."""
    return run_python([sys.executable, str(CONVERTER), str(src), str(dst), *extra], cwd=ROOT, timeout=300)


def _run_cli_in_process(monkeypatch, capsys, src: Path, dst: Path, *extra: str) -> str:
    """The tool's ``__main__`` in this interpreter; returns its stdout, raises ``SystemExit`` on errors."""
    monkeypatch.setattr(sys, 'argv', [str(CONVERTER), str(src), str(dst), *extra])
    runpy.run_path(str(CONVERTER), run_name='__main__')
    return capsys.readouterr().out


def _finetune_backbone(arch, **kwargs):
    """The backbone with the official fine-tuning / downstream settings (featmap of the last layer)."""
    kwargs = dict(dict(layout='official_mae', with_cls_token=False, out_type='featmap', final_norm=False,
                       rope_mode='2d'), **kwargs)
    return VisionLLaMA(arch=arch, **kwargs)


class _CaptureMMLog(logging.Handler):
    """Collects what mmengine logs (``load_state_dict`` reports missing/unexpected keys as a warning)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())

    def __enter__(self):
        MMLogger.get_current_instance().addHandler(self)
        return self

    def __exit__(self, *exc):
        MMLogger.get_current_instance().removeHandler(self)


def _load_like_mmengine(model, path):
    """Load ``backbone.*`` of ``path`` the way ``init_cfg=Pretrained(prefix='backbone.')`` does; return the
    missing and unexpected keys."""
    state_dict = _load_checkpoint_with_prefix('backbone.', str(path), map_location='cpu')
    result = model.load_state_dict(state_dict, strict=False)
    return set(result.missing_keys), set(result.unexpected_keys)


def _max_diff(expected, actual):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert e.shape == a.shape, (e.shape, a.shape)
    return max((e - a).abs().max().item() for e, a in zip(expected, actual))


# ----------------------------------------------------------------------------------- round trips (CLI)
@pytest.mark.parametrize('feedforward_channels,subprocess_cli', [(None, True), (96, False)])
def test_small_round_trip_through_the_cli(tmp_path, monkeypatch, capsys, feedforward_channels, subprocess_cli):
    """Embed 64, 3 layers, 4 heads. ``None``: the official width rule (4C -> hidden 768). ``96``: a width that
    breaks the rule (hidden 256), so the backbone must be built with the hidden size read from the weights."""
    official = _official(dim=64, depth=3, heads=4, feedforward_channels=feedforward_channels, out_indices=(0, 2))
    src, dst = tmp_path / 'epoch_800.pth', tmp_path / 'converted.pth'
    torch.save(_mmengine_checkpoint(official), src)
    if subprocess_cli:
        result = _convert_with_cli(src, dst)
        assert result.returncode == 0, result.stderr
        stdout = result.stdout
    else:
        stdout = _run_cli_in_process(monkeypatch, capsys, src, dst)

    info = torch.load(dst, weights_only=True)['meta']['architecture']
    rule = feedforward_channels is None
    assert (info['embed_dims'], info['num_layers'], info['patch_size']) == (64, 3, 16)
    assert info['ffn_hidden_dims'] == (768 if rule else 256) and info['matches_official_mae'] is rule
    assert ('matches layout="official_mae"' if rule else 'does NOT match') in stdout

    arch = dict(embed_dims=64, num_layers=3, num_heads=4)
    if not rule:
        arch['ffn_hidden_dims'] = info['ffn_hidden_dims']
    model = _finetune_backbone(arch, out_indices=(0, 2)).eval()
    missing, unexpected = _load_like_mmengine(model, dst)
    assert not missing and unexpected == UNUSED_BY_FEATMAP

    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        diff = _max_diff(official(images), model(images))
    assert diff < TOLERANCE, diff

    converted = torch.load(dst, weights_only=True)['state_dict']  # decoder kept as is, pos_embed dropped
    for key in FAKE_DECODER:
        assert key in converted
    assert 'backbone.pos_embed' not in converted and 'backbone.norm.weight' in converted


@pytest.fixture(scope='module')
def base_official():
    """True VisionLLaMA-B MAE size: 768 wide, 12 layers, 12 heads, SwiGLU 8192 with biases (~256M params)."""
    return _official(dim=768, depth=12, heads=12, img_size=224)


@pytest.fixture(scope='module')
def base_converted(base_official, tmp_path_factory):
    folder = tmp_path_factory.mktemp('base')
    src, dst = folder / 'epoch_1600.pth', folder / 'vision-llama-base-mae.pth'
    torch.save(_mmengine_checkpoint(base_official), src)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(sys, 'argv', [str(CONVERTER), str(src), str(dst)])
        runpy.run_path(str(CONVERTER), run_name='__main__')
    src.unlink()
    info = torch.load(dst, weights_only=True, mmap=True)['meta']['architecture']
    assert info['arch'] == 'base' and info['ffn_hidden_dims'] == 8192 and info['num_heads'] == 12
    return dst


@pytest.fixture(scope='module')
def base_images():
    return torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))


@pytest.fixture(scope='module')
def base_expected(base_official, base_images):
    with torch.no_grad():
        return base_official(base_images)


def test_base_round_trip_loads_through_init_cfg_and_matches(base_converted, base_expected, base_images):
    """The mmengine path of the configs: ``init_cfg=dict(type='Pretrained', prefix='backbone.')``."""
    model = _finetune_backbone('base', init_cfg=dict(type='Pretrained', checkpoint=str(base_converted),
                                                     prefix='backbone.'))
    with _CaptureMMLog() as log:
        model.init_weights()
    report = '\n'.join(log.messages)
    assert 'missing keys' not in report, report
    for key in UNUSED_BY_FEATMAP:  # reported as unexpected, nothing else is
        assert key in report
    with torch.no_grad():
        diff = _max_diff(base_expected, model.eval()(base_images))
    assert diff < TOLERANCE, diff


def test_finetune_config_backbone_loads_the_converted_base_file(base_converted, base_expected, base_images):
    """The backbone of the MAE fine-tuning config loads the converted file with no missing key; its
    ``pool_norm`` (the official ``ln2`` of the GAP feature, absent from MAE checkpoints) comes as a fresh
    LayerNorm. At 224 px its AS2DRoPE equals the official integer RoPE, so the pooled feature matches too."""
    cfg = Config.fromfile(str(FINETUNE_CONFIG))
    cfg.model.backbone.init_cfg = None
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model).eval()
    missing, unexpected = _load_like_mmengine(model.backbone, base_converted)
    assert missing == set(), missing
    assert unexpected == UNUSED_BY_FINETUNING, unexpected

    with torch.no_grad():
        expected = torch.nn.functional.layer_norm(base_expected[-1].mean((2, 3)), (768, ), eps=1e-6)
        pooled = model.backbone(base_images)[-1]
    diff = (pooled - expected).abs().max().item()
    assert diff < TOLERANCE, diff


def test_converted_file_loads_strictly_into_the_mae_pretraining_model():
    """``neck.*``/``head.*`` stay mmpretrain's MAE names: our MAE model takes every key of the converted file
    but the fine-tuning ``pool_norm`` (the MAE encoder returns raw tokens)."""
    cfg = Config.fromfile(str(MAE_NANO_CONFIG))
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    backbone = model.backbone
    official = _official(dim=backbone.embed_dims, depth=backbone.num_layers,
                         heads=backbone.layers[0].attn.num_heads, img_size=cfg.model.backbone.img_size,
                         patch=cfg.model.backbone.patch_size, ffn_hidden=backbone.layers[0].ffn.w3.in_features)
    decoder = {f'neck.{k}': torch.randn_like(v) for k, v in model.neck.state_dict().items()}
    decoder.update({f'head.{k}': torch.randn_like(v) for k, v in model.head.state_dict().items()})
    converted = convert_visionllama_mae(_mmengine_checkpoint(official, decoder)['state_dict'])
    missing, unexpected = model.load_state_dict(converted, strict=False)
    assert not missing and set(unexpected) == {'backbone.pool_norm.weight', 'backbone.pool_norm.bias'}
    torch.testing.assert_close(model.backbone.layers[-1].norm2.bias, official.layers[-1].ln2.bias)


# ----------------------------------------------------------------------------------- ViTDet windows
@pytest.mark.parametrize('img_size', [320, 224])
def test_vitdet_windows_match_the_official_unmasked_padding(img_size):
    """20x20 tokens with window 14: windows overhang the grid and the official code attends to the zero
    padding (after ``ln1``); the global block sees the full integer 20x20 grid. 14x14: no padding."""
    torch.manual_seed(0)
    official = randomize_(OfficialLLaMADET(img_size=img_size, dim=64, depth=4, heads=4, global_blocks=(2, ),
                                           out_indices=(1, 2, 3)).eval())
    converted = convert_visionllama_mae(_mmengine_checkpoint(official)['state_dict'])
    backbone = {k[len('backbone.'):]: v for k, v in converted.items() if k.startswith('backbone.')}
    images = torch.randn(2, 3, img_size, img_size)
    with torch.no_grad():
        expected = official(images)
    diffs = {}
    for mask in (False, True):
        model = _finetune_backbone(dict(embed_dims=64, num_layers=4, num_heads=4), img_size=img_size,
                                   window_size=14, global_blocks=(2, ), mask_window_padding=mask,
                                   out_indices=(1, 2, 3)).eval()
        result = model.load_state_dict(backbone, strict=False)
        assert not result.missing_keys
        with torch.no_grad():
            diffs[mask] = _max_diff(expected, model(images))
    assert diffs[False] < TOLERANCE, diffs
    if img_size % (14 * 16):
        assert diffs[True] > 1e-2, diffs  # masking the padding is a real change
    else:
        assert diffs[True] < TOLERANCE, diffs


# ----------------------------------------------------------------------------------- key map and errors
def test_key_mapping():
    official = _official(dim=64, depth=2, heads=4)
    state_dict = _mmengine_checkpoint(official)['state_dict']
    state_dict['backbone.ln2.weight'] = torch.ones(64)  # a fine-tuned (avg_featmap) file's GAP norm
    state_dict['head.fc.weight'] = torch.zeros(10, 64)
    converted = convert_visionllama_mae(state_dict)
    torch.testing.assert_close(converted['backbone.layers.1.norm1.weight'], official.layers[1].ln1.weight)
    torch.testing.assert_close(converted['backbone.layers.1.norm2.bias'], official.layers[1].ln2.bias)
    torch.testing.assert_close(converted['backbone.layers.0.ffn.w12.bias'], official.layers[0].ffn.w12.bias)
    torch.testing.assert_close(converted['backbone.layers.0.ffn.w3.weight'], official.layers[0].ffn.w3.weight)
    torch.testing.assert_close(converted['backbone.norm.bias'], official.ln1.bias)
    torch.testing.assert_close(converted['backbone.cls_token'], official.cls_token)
    assert 'backbone.pool_norm.weight' in converted and 'head.fc.weight' in converted
    assert 'backbone.pos_embed' not in converted
    assert not any('.ln1.' in k or '.ln2.' in k for k in converted if k.startswith('backbone.'))
    assert len(converted) == len(state_dict) - 1


def test_architecture_report():
    info = describe_visionllama_mae(convert_visionllama_mae(
        _mmengine_checkpoint(_official(dim=64, depth=2, heads=4))['state_dict']))
    assert info == dict(embed_dims=64, num_layers=2, patch_size=16, in_channels=3, ffn_hidden_dims=768,
                        ffn_bias=True, official_mae_hidden_dims=768, matches_official_mae=True, arch=None,
                        num_heads=None)
    assert 'num_heads' in format_architecture(info)


@pytest.mark.parametrize('key,message', [
    ('backbone.layers.0.gamma_1', "'backbone.layers.0.gamma_1'"),
    ('backbone.blocks.0.mlp.c_fc1.weight', "'backbone.blocks.0.mlp.c_fc1.weight'"),
    ('patch_embed.projection.weight', "'patch_embed.projection.weight'"),  # missing backbone. prefix
])
def test_unknown_key_is_rejected(key, message):
    state_dict = _mmengine_checkpoint(_official(dim=64, depth=2, heads=4))['state_dict']
    state_dict[key] = torch.zeros(64)
    with pytest.raises(KeyError, match=message):
        convert_visionllama_mae(state_dict)


def test_inconsistent_ffn_is_rejected():
    state_dict = _mmengine_checkpoint(_official(dim=64, depth=2, heads=4))['state_dict']
    state_dict['backbone.layers.1.ffn.w12.weight'] = torch.zeros(512, 64)
    with pytest.raises(ValueError, match='Layer 1: ffn.w12'):
        convert_visionllama_mae(state_dict)


def test_cli_rejects_a_file_with_unknown_keys(tmp_path, monkeypatch, capsys):
    """``sys.exit(message)``: the message goes to stderr, the exit status is 1, no traceback."""
    src, dst = tmp_path / 'random.pth', tmp_path / 'out.pth'
    torch.save({'meta': {}, 'state_dict': {'backbone.blocks.3.attn.relative_position_bias_table': torch.randn(4),
                                           'encoder.weight': torch.randn(2, 2)}}, src)
    with pytest.raises(SystemExit) as exit_info:
        _run_cli_in_process(monkeypatch, capsys, src, dst)
    message = exit_info.value.code
    assert isinstance(message, str) and message.startswith('visionllama2mmcausal: Unexpected key')
    assert 'relative_position_bias_table' in message and not dst.exists()


def test_cli_reports_a_missing_source(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _run_cli_in_process(monkeypatch, capsys, tmp_path / 'nope.pth', tmp_path / 'out.pth')
    message = str(exit_info.value.code)  # a string code: printed to stderr, exit status 1
    assert message.startswith('visionllama2mmcausal:') and 'nope.pth' in message and 'does not exist' in message


def test_cli_converts_a_full_training_checkpoint(tmp_path, monkeypatch, capsys):
    """A full mmengine training checkpoint pickles non-tensor objects: they are kept as inert data."""
    src, dst = tmp_path / 'epoch_800.pth', tmp_path / 'out.pth'
    checkpoint = _mmengine_checkpoint(_official(dim=64, depth=2, heads=4))
    checkpoint['message_hub'] = logging.LogRecord('x', 20, '', 0, '', None, None)  # any non-plain object
    torch.save(checkpoint, src)
    stdout = _run_cli_in_process(monkeypatch, capsys, src, dst)
    assert 'logging.LogRecord' in stdout and 'Saved' in stdout and dst.exists()
