"""cait2mmcausal: official deit CaiT files (``model`` / ``module.``-prefixed) and timm copies (clean keys) -> mmcausal
checkpoints with the official logits (classification) or the official patch tokens (dense, resized ``pos_embed``)."""
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch import Tensor

from mmcausal.converters import convert_cait, describe_cait, load_source_state_dict
from mmcausal.registry import MODELS
from reference.official_cait import OfficialCaiT, build_official, official_file, randomize_, timm_file
from zygote import run_python

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/cait2mmcausal.py'
CONFIGS = ROOT / 'configs/cait'
WIDTH = {'xxs24': 192, 's24': 384}
ATOL = 1e-5


def _cli(src: Path, dst: Path, *options: str) -> subprocess.CompletedProcess:
    """The converter as a separate process."""
    return run_python([sys.executable, str(CONVERTER), *options, str(src), str(dst)], cwd=ROOT, timeout=300)


def _cli_in_process(monkeypatch, capsys, *argv: str) -> str:
    """The converter's ``__main__`` run in this process (same code path, no second import of mmcausal); stdout."""
    monkeypatch.setattr(sys, 'argv', [str(CONVERTER), *argv])
    runpy.run_path(str(CONVERTER), run_name='__main__')
    return capsys.readouterr().out


def _classifier(arch: str, impl: str) -> torch.nn.Module:
    init_default_scope('mmpretrain')
    return MODELS.build(dict(
        type='ImageClassifier', backbone=dict(type='CaiT', arch=arch, attn_impl=impl),
        head=dict(type='LinearClsHead', num_classes=1000, in_channels=WIDTH[arch]))).eval()


def _backbone_part(converted: Dict[str, Tensor]) -> Dict[str, Tensor]:
    return {key[len('backbone.'):]: value for key, value in converted.items() if key.startswith('backbone.')}


def _small_official(seed: int = 0) -> OfficialCaiT:
    """A 2-block model with the official names, for the key map (cheap)."""
    torch.manual_seed(seed)
    return randomize_(OfficialCaiT(img_size=64, embed_dim=96, depth=2, num_heads=2, num_classes=10), seed)


@pytest.fixture(scope='module')
def official(single_thread):
    """Randomised official XXS24 / S24 at 224 and their logits on one image (built once per arch)."""
    cache = {}

    def get(arch: str):
        if arch not in cache:
            model = randomize_(build_official(arch).eval(), seed=len(cache))
            images = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(7))
            with torch.no_grad():
                cache[arch] = model, images, model(images)
        return cache[arch]

    return get


# ------------------------------------------------------------------------------------------------ the oracle itself


@pytest.mark.parametrize('name,expected', [('cait_XXS24_224', 11_956_264), ('cait_S24_224', 46_916_200),
                                           ('cait_S24', 47_062_120), ('cait_M48', 356_460_520)])
def test_oracle_parameter_counts_equal_the_released_models(name, expected):
    with torch.device('meta'):  # shapes only: no memory, no init
        model = build_official(name)
    assert sum(param.numel() for param in model.parameters()) == expected


def test_oracle_state_dict_has_the_official_layout():
    with torch.device('meta'):
        keys = list(build_official('xxs24').state_dict())
    assert len(keys) == 476
    assert keys[:4] == ['cls_token', 'pos_embed', 'patch_embed.proj.weight', 'patch_embed.proj.bias']
    assert keys[4:22] == [f'blocks.0.{name}' for name in (
        'gamma_1', 'gamma_2', 'norm1.weight', 'norm1.bias', 'attn.qkv.weight', 'attn.qkv.bias', 'attn.proj.weight',
        'attn.proj.bias', 'attn.proj_l.weight', 'attn.proj_l.bias', 'attn.proj_w.weight', 'attn.proj_w.bias',
        'norm2.weight', 'norm2.bias', 'mlp.fc1.weight', 'mlp.fc1.bias', 'mlp.fc2.weight', 'mlp.fc2.bias')]
    assert keys[-4:] == ['norm.weight', 'norm.bias', 'head.weight', 'head.bias']
    assert {m.eps for m in build_official('xxs24', img_size=32).modules() if isinstance(m, torch.nn.LayerNorm)} == {
        1e-6}


# ---------------------------------------------------------------------------------------------------------- key map


def _expected_keys(depth: int) -> set:
    """The backbone keys of the API table for ``depth`` SA blocks, with the class-attention stage, without norm."""
    params = ('weight', 'bias')
    block = ('ls1.weight', 'ls2.weight') + tuple(f'{module}.{param}' for module in (
        'norm1', 'norm2', 'ffn.layers.0.0', 'ffn.layers.1') for param in params)
    sa_attn = tuple(f'attn.{linear}.{param}' for linear in ('qkv', 'proj', 'proj_l', 'proj_w') for param in params)
    ca_attn = tuple(f'attn.{linear}.{param}' for linear in ('q', 'k', 'v', 'proj') for param in params)
    keys = {'backbone.pos_embed', 'backbone.patch_embed.projection.weight', 'backbone.patch_embed.projection.bias',
            'backbone.class_attn.cls_token'}
    keys |= {f'backbone.layers.{i}.{name}' for i in range(depth) for name in block + sa_attn}
    keys |= {f'backbone.class_attn.layers.{j}.{name}' for j in range(2) for name in block + ca_attn}
    return keys


def test_key_map_of_both_file_formats():
    model = _small_official()
    state = model.state_dict()
    converted = convert_cait(timm_file(state))
    prefixed = convert_cait(official_file(state)['model'])
    expected = _expected_keys(2) | {'backbone.norm.weight', 'backbone.norm.bias', 'head.fc.weight', 'head.fc.bias'}
    assert set(converted) == expected
    assert converted.keys() == prefixed.keys()
    assert all(converted[key] is prefixed[key] for key in converted)  # renamed, never copied or reshaped
    pairs = {
        'patch_embed.proj.weight': 'backbone.patch_embed.projection.weight', 'pos_embed': 'backbone.pos_embed',
        'cls_token': 'backbone.class_attn.cls_token', 'blocks.1.gamma_1': 'backbone.layers.1.ls1.weight',
        'blocks.0.gamma_2': 'backbone.layers.0.ls2.weight', 'blocks.1.attn.proj_l.weight':
        'backbone.layers.1.attn.proj_l.weight', 'blocks.0.attn.proj_w.bias': 'backbone.layers.0.attn.proj_w.bias',
        'blocks.1.mlp.fc1.weight': 'backbone.layers.1.ffn.layers.0.0.weight', 'blocks.0.mlp.fc2.bias':
        'backbone.layers.0.ffn.layers.1.bias', 'blocks_token_only.1.gamma_2': 'backbone.class_attn.layers.1.ls2.weight',
        'blocks_token_only.0.attn.k.weight': 'backbone.class_attn.layers.0.attn.k.weight',
        'blocks_token_only.1.norm1.bias': 'backbone.class_attn.layers.1.norm1.bias',
        'blocks_token_only.0.mlp.fc2.weight': 'backbone.class_attn.layers.0.ffn.layers.1.weight',
        'norm.bias': 'backbone.norm.bias', 'head.weight': 'head.fc.weight'}
    for old, new in pairs.items():
        assert converted[new] is state[old], old
    info, text = describe_cait(converted)
    assert (info['embed_dims'], info['num_layers'], info['num_heads'], info['pos_embed_tokens']) == (96, 2, 2, 16)
    assert info['arch'] is None and info['class_attention'] and info['head'] and '(4x4)' in text


def test_dense_conversion_drops_the_class_path_and_resizes_pos_embed():
    state = _small_official().state_dict()
    dense = convert_cait(state, grid=(6, 5), dense=True)
    assert set(dense) == {key for key in _expected_keys(2) if '.class_attn.' not in key}
    with_norm = convert_cait(state, grid=(4, 4), dense=True, keep_norm=True)
    assert set(with_norm) - set(dense) == {'backbone.norm.weight', 'backbone.norm.bias'}
    assert with_norm['backbone.pos_embed'] is state['pos_embed']  # same grid: untouched
    # an independent bicubic resize of the square 4x4 table (no class row, align_corners=False)
    table = state['pos_embed'].reshape(1, 4, 4, 96).permute(0, 3, 1, 2)
    expected = F.interpolate(table, size=(6, 5), mode='bicubic', align_corners=False).flatten(2).transpose(1, 2)
    torch.testing.assert_close(dense['backbone.pos_embed'], expected, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match='square grid'):
        convert_cait({'pos_embed': torch.zeros(1, 12, 8)}, grid=(4, 4))


def test_unknown_key_is_a_clear_error(tmp_path):
    state = _small_official().state_dict()
    with pytest.raises(KeyError, match=r"'blocks.0.attn.relative_position_bias_table'.*official deit"):
        convert_cait({**state, 'blocks.0.attn.relative_position_bias_table': torch.zeros(1)})
    with pytest.raises(KeyError, match="'module.dist_token'"):
        convert_cait(official_file({**state, 'dist_token': torch.zeros(1, 1, 96)})['model'])
    src, dst = tmp_path / 'with_head_dist.pth', tmp_path / 'out.pth'
    torch.save(official_file({**state, 'head_dist.weight': torch.zeros(10, 96)}), src)
    result = _cli(src, dst)
    assert result.returncode == 1 and not dst.exists()
    assert "cait2mmcausal: Unexpected key 'module.head_dist.weight' in the CaiT checkpoint" in result.stderr


# --------------------------------------------------------------------------------- equivalence with the official model


@pytest.mark.parametrize('impl', ['explicit', 'sdpa'])
@pytest.mark.parametrize('arch', ['xxs24', 's24'])
def test_timm_file_gives_the_official_logits(official, arch, impl):
    model, images, expected = official(arch)
    ours = _classifier(arch, impl)
    ours.load_state_dict(convert_cait(timm_file(model.state_dict())), strict=True)
    with torch.no_grad():
        logits = ours(images, mode='tensor')
    assert (logits - expected).abs().max().item() < ATOL


@pytest.mark.parametrize('arch', ['xxs24', 's24'])
def test_official_file_gives_the_official_logits(official, arch, tmp_path, monkeypatch, capsys):
    """The official wrapping (``model`` + ``module.``) through the CLI with the XXS24 ImageNet config, or the
    loader (S24)."""
    model, images, expected = official(arch)
    src, dst = tmp_path / f'{arch.upper()}_224.pth', tmp_path / 'converted.pth'
    torch.save(official_file(model.state_dict()), src)
    if arch == 'xxs24':
        out = _cli_in_process(monkeypatch, capsys, '--config', str(CONFIGS / 'cait-xxs24_8xb128-400e_in1k.py'),
                              str(src), str(dst))
        assert 'CaiT xxs24: embed_dims=192, 24 SA blocks, 4 heads, patch 16, 196 position rows (14x14)' in out
        weights = torch.load(dst, weights_only=True)['state_dict']
    else:
        weights = convert_cait(load_source_state_dict(str(src)))
    for impl in ('explicit', 'sdpa'):
        ours = _classifier(arch, impl)
        ours.load_state_dict(weights, strict=True)
        with torch.no_grad():
            assert (ours(images, mode='tensor') - expected).abs().max().item() < ATOL, impl


def test_dense_config_conversion_loads_strictly_and_gives_the_official_patches(official, tmp_path, monkeypatch,
                                                                              capsys):
    """--config of the UperNet config (dense, 512 px): no class path nor norm, pos_embed 14x14 -> 32x32; the
    backbone of that config (at XXS24 width) returns the official model's SA outputs at its out_indices when the
    official model is given the same resized table."""
    model, _, _ = official('xxs24')
    config = CONFIGS / 'upernet_cait-s24_8xb2-160k_ade20k-512x512.py'
    src, dst = tmp_path / 'XXS24_224.pth', tmp_path / 'dense.pth'
    torch.save(official_file(model.state_dict()), src)
    out = _cli_in_process(monkeypatch, capsys, str(src), str(dst), '--config', str(config))
    assert 'class-attention stage dropped, classifier head dropped' in out
    weights = torch.load(dst, weights_only=True)['state_dict']
    assert set(weights) == {key for key in _expected_keys(24) if '.class_attn.' not in key}
    weights = _backbone_part(weights)
    table = model.pos_embed.detach().reshape(1, 14, 14, 192).permute(0, 3, 1, 2)
    resized = F.interpolate(table, size=(32, 32), mode='bicubic', align_corners=False).flatten(2).transpose(1, 2)
    torch.testing.assert_close(weights['pos_embed'], resized, rtol=0, atol=1e-6)

    backbone_cfg = Config.fromfile(str(config)).model.backbone
    backbone_cfg.update(arch='xxs24', init_cfg=None)
    init_default_scope('mmseg')
    ours = MODELS.build(backbone_cfg).eval()
    ours.load_state_dict(weights, strict=True)
    official_512 = build_official('xxs24', img_size=512).eval()
    official_512.load_state_dict({**model.state_dict(), 'pos_embed': resized}, strict=True)
    images = torch.randn(1, 3, 512, 512, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        featmaps = ours(images)
        patches = official_512.forward_patches(images)
    assert len(featmaps) == len(backbone_cfg.out_indices) == 4
    for index, featmap in zip(backbone_cfg.out_indices, featmaps):
        expected = patches[index].transpose(1, 2).reshape(1, 192, 32, 32)
        assert featmap.shape == (1, 192, 32, 32)
        assert (featmap - expected).abs().max().item() < ATOL, index


@pytest.mark.parametrize('out_type', ['featmap', 'avg_featmap'])
def test_dense_conversion_with_the_final_norm(official, out_type):
    """keep_norm: the final ``norm`` on the patch tokens (``feature_norm='final'``) or before average pooling."""
    model, images, _ = official('xxs24')
    weights = _backbone_part(convert_cait(model.state_dict(), grid=(14, 14), dense=True, keep_norm=True))
    init_default_scope('mmpretrain')
    ours = MODELS.build(dict(type='CaiT', arch='xxs24', out_type=out_type,
                             feature_norm='final' if out_type == 'featmap' else 'none')).eval()
    ours.load_state_dict(weights, strict=True)
    with torch.no_grad():
        feature = ours(images)[-1]
        normed = model.norm(model.forward_patches(images)[-1])
    expected = normed.transpose(1, 2).reshape(1, 192, 14, 14) if out_type == 'featmap' else normed.mean(dim=1)
    assert feature.shape == expected.shape
    assert (feature - expected).abs().max().item() < ATOL


def test_class_attention_pool_neck_config_gives_the_official_logits(official, tmp_path, monkeypatch, capsys):
    """A featmap backbone + ClassAttentionPool neck + LinearClsHead is the official model re-cut: with --config of
    such a classifier the CA stage and ``norm`` go to ``neck.`` and the logits are the official ones."""
    model, images, expected = official('xxs24')
    config = tmp_path / 'cait-xxs24-featmap_ca-pool.py'
    config.write_text(
        "model = dict(type='ImageClassifier', backbone=dict(type='CaiT', arch='xxs24', out_type='featmap'),\n"
        "             neck=dict(type='ClassAttentionPool', embed_dims=192, num_heads=4),\n"
        "             head=dict(type='LinearClsHead', num_classes=1000, in_channels=192))\n")
    src, dst = tmp_path / 'XXS24_224.pth', tmp_path / 'converted.pth'
    torch.save(official_file(model.state_dict()), src)
    out = _cli_in_process(monkeypatch, capsys, '--config', str(config), str(src), str(dst))
    assert 'class-attention stage kept, classifier head kept' in out
    weights = torch.load(dst, weights_only=True)['state_dict']
    assert {key.split('.')[1] for key in weights if key.startswith('neck.')} == {'class_attn', 'norm'}
    init_default_scope('mmpretrain')
    ours = MODELS.build(Config.fromfile(str(config)).model).eval()
    ours.load_state_dict(weights, strict=True)
    with torch.no_grad():
        assert (ours(images, mode='tensor') - expected).abs().max().item() < ATOL
    with pytest.raises(ValueError, match='ca_neck'):
        convert_cait(model.state_dict(), dense=True, ca_neck=True)
