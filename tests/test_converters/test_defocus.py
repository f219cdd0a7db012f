"""defocus2mmcausal: official classification files (model / model_ema beside a pickled yacs config, MLP heads, the
22k -> 1k head slice) and detection files (flat or backbone.-prefixed) -> mmcausal checkpoints."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.registry import init_default_scope

from foreign_pickles import save_with_config_node
from mmcausal.converters import convert_defocus, load_source_state_dict
from mmcausal.registry import MODELS
from reference.official_defocus import DefocusMambaOfficial

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/defocus2mmcausal.py'


def _official(seed, **kwargs):
    torch.manual_seed(seed)
    model = DefocusMambaOfficial(d=64, depth=2, e=128, num_classes=12, **kwargs).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def _convert(src, dst, *options):
    return subprocess.run([sys.executable, str(CONVERTER), *options, str(src), str(dst)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def _classifier(hidden=None, num_classes=12):
    init_default_scope('mmpretrain')
    return MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='DefocusMamba', arch=dict(embed_dims=64, num_layers=2), out_type='raw'),
        head=dict(type='DefocusClsHead', num_classes=num_classes, in_channels=64, hidden_dims=hidden))).eval()


def test_classification_file_converts_to_the_official_logits(tmp_path):
    model, model_ema = _official(0, mlp_head=True), _official(1, mlp_head=True)
    src, dst = tmp_path / 'defocus_mamba_large.pth', tmp_path / 'converted.pth'
    save_with_config_node(dict(model=model.state_dict(), model_ema=model_ema.state_dict(), epoch=19), src,
                          config=dict(MODEL=dict(TYPE='mamba')))
    result = _convert(src, dst, '--ema')
    assert result.returncode == 0, result.stderr
    assert 'fake_yacs_config.CfgNode' in result.stdout  # reported, never executed
    images = torch.randn(2, 3, 224, 224)
    for weights, official in ((torch.load(dst, weights_only=True)['state_dict'], model_ema),
                              (convert_defocus(load_source_state_dict(str(src))), model)):  # 'model' by default
        ours = _classifier(hidden=192)
        ours.load_state_dict(weights, strict=True)
        with torch.no_grad():
            assert (ours(images, mode='tensor') - official(images)).abs().max() < 1e-5


def test_head_rows_slice_the_classifiers_like_the_official_22k_to_1k():
    model = _official(0, mlp_head=True)
    rows = [11, 0, 5, 7]
    ours = _classifier(hidden=192, num_classes=4)
    ours.load_state_dict(convert_defocus(model.state_dict(), head_rows=rows), strict=True)
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert (ours(images, mode='tensor') - model(images)[:, rows]).abs().max() < 1e-5
    torch.testing.assert_close(ours.head.aux_fc[2].weight, model.head2[2].weight[rows])
    with pytest.raises(ValueError, match='head_rows reach class 12'):
        convert_defocus(model.state_dict(), head_rows=[12])
    with pytest.raises(ValueError, match='non-empty'):
        convert_defocus(model.state_dict(), head_rows=[])


@pytest.mark.parametrize('prefix', ['', 'backbone.'])
def test_detection_files_keep_the_backbone(prefix):
    official = _official(0).state_dict()
    backbone = {k.replace('patch_embed.proj.', 'patch_embed.projection.'): v for k, v in official.items()
                if not k.startswith(('head', 'norm.'))}
    detector = {prefix + k: v for k, v in backbone.items()}
    if prefix:
        detector.update({'neck.fpn1.0.weight': torch.zeros(1), 'bbox_head.cls_branches.0.weight': torch.zeros(1),
                         'query_embedding.weight': torch.zeros(1)})
    converted = convert_defocus(detector)
    expected = {'backbone.cls_token', 'backbone.patch_embed.projection.weight', 'backbone.patch_embed.projection.bias'}
    expected |= {f'backbone.layers.{i}.{name}' for i in range(2) for name in (
        'norm1.weight', 'attn.in_proj.weight', 'attn.conv1d.weight', 'attn.conv1d.bias', 'attn.x_proj.weight',
        'attn.dt_proj.weight', 'attn.dt_proj.bias', 'attn.A_log', 'attn.D', 'attn.rope.freq', 'attn.out_proj.weight')}
    assert set(converted) == expected  # the neck and DINO head of a detector file are left out
    torch.testing.assert_close(converted['backbone.patch_embed.projection.weight'], official['patch_embed.proj.weight'])


def test_unknown_keys_and_missing_ema_are_explained(tmp_path):
    with pytest.raises(KeyError, match='official De-focus Mamba'):
        convert_defocus({'blocks.0.attn.qkv.weight': torch.zeros(1)})
    src = tmp_path / 'no_ema.pth'
    torch.save(dict(model=_official(0).state_dict()), src)
    result = _convert(src, tmp_path / 'out.pth', '--ema')
    assert result.returncode == 1 and "has no 'model_ema' weights" in result.stderr
