"""visionllama2mmcausal on the supervised deit format: the official model's state dict (random weights) converts
into an mmpretrain classifier with ``layout='official_deit'`` that gives the official logits, for the plain model
and every Table 7 variant the official code can express.

The official model is :class:`reference.official_visionllama.OfficialDeiTVisionLLaMA`, written from the official
model code (``deit/my_models.py``), never from mmcausal.
"""
import runpy
import sys
from pathlib import Path

import pytest
import torch
from mmengine.registry import init_default_scope

from mmcausal.converters.vision_llama_deit import convert_visionllama_deit
from mmcausal.registry import MODELS
from reference.official_visionllama import OfficialDeiTVisionLLaMA

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/visionllama2mmcausal.py'
TINY = dict(dim=64, depth=2, heads=2, img_size=64, patch=8, num_classes=10)
TOLERANCE = 1e-4  # max abs difference of fp32 logits

#: official constructor switches -> the same model in mmcausal's backbone arguments
VARIANTS = {
    'plain': ({}, {}),
    'gelu': (dict(mlp='gelu'), dict(ffn_type='gelu')),
    'rmsnorm': (dict(norm='rms'), dict(norm_cfg=dict(type='RMSNorm', eps=1e-6))),
    'rope-ratio-25': (dict(rpe_ratio=0.25), dict(rope_ratio=0.25)),
    'rope-unshared': (dict(share_rpe=False), dict(rope_shared=False)),
    'rope-unshared-half': (dict(share_rpe=False, rpe_ratio=0.5), dict(rope_shared=False, rope_ratio=0.5)),
    'theta-100': (dict(theta=100.), dict(rope_theta=100.)),
    'gap': (dict(use_cls_token=False), dict(with_cls_token=False, out_type='avg_featmap', final_norm=False)),
    'cls-floor': (dict(cls_row='floor'), dict(cls_rope='legacy_floor')),
}


def _official(seed=0, **kwargs) -> OfficialDeiTVisionLLaMA:
    """The official model with every parameter random: LayerScale near 1 (its 1e-4 start would hide the blocks) and
    large query / key weights (attention that depends on the RoPE positions)."""
    torch.manual_seed(seed)
    model = OfficialDeiTVisionLLaMA(**dict(TINY, **kwargs)).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if 'gamma_' in name or name.endswith('norm1.weight') or name.endswith('norm2.weight') or name == \
                    'norm.weight':
                param.copy_(1 + 0.3 * torch.randn_like(param))
            elif name.endswith('attn.qkv.weight'):  # sharp attention, so the positions matter
                param.normal_(0., 0.3)
            else:
                param.add_(0.05 * torch.randn_like(param))
    return model


def _classifier(**backbone):
    """An mmpretrain ``ImageClassifier`` of the tiny size, as the ``*_deit3-*`` configs build it."""
    init_default_scope('mmpretrain')
    arch = dict(embed_dims=TINY['dim'], num_layers=TINY['depth'], num_heads=TINY['heads'])
    return MODELS.build(dict(
        type='ImageClassifier',
        backbone=dict(type='VisionLLaMA', arch=arch, img_size=TINY['img_size'], patch_size=TINY['patch'],
                      layout='official_deit', rope_mode='2d', **backbone),
        head=dict(type='LinearClsHead', num_classes=TINY['num_classes'], in_channels=TINY['dim']))).eval()


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_converted_model_gives_the_official_logits(variant):
    official_kwargs, ours_kwargs = VARIANTS[variant]
    official = _official(**official_kwargs)
    model = _classifier(**ours_kwargs)
    model.load_state_dict(convert_visionllama_deit(official.state_dict()), strict=True)
    images = torch.randn(2, 3, TINY['img_size'], TINY['img_size'])
    with torch.no_grad():
        expected, actual = official(images), model(images, mode='tensor')
    assert (expected - actual).abs().max() < TOLERANCE
    # other RoPE frequencies are visible in the logits (the comparison can fail)
    wrong = _classifier(**dict(ours_kwargs, rope_theta=3 * ours_kwargs.get('rope_theta', 1e4)))
    wrong.load_state_dict(convert_visionllama_deit(official.state_dict()), strict=True)
    with torch.no_grad():
        assert (expected - wrong(images, mode='tensor')).abs().max() > 100 * TOLERANCE


def test_key_mapping():
    converted = convert_visionllama_deit(_official().state_dict())
    assert converted['backbone.layers.1.ffn.w12.weight'].shape == (2 * 256, 64)  # [c_fc1; c_fc2], width 256
    assert {'backbone.cls_token', 'backbone.norm.weight', 'backbone.layers.0.ls1.weight', 'head.fc.bias',
            'backbone.patch_embed.projection.weight'} <= set(converted)
    gap = convert_visionllama_deit(_official(use_cls_token=False).state_dict())
    assert 'backbone.pool_norm.weight' in gap and 'backbone.norm.weight' not in gap


def test_unknown_and_orphan_keys_are_rejected():
    state_dict = _official().state_dict()
    with pytest.raises(KeyError, match='pos_embed'):
        convert_visionllama_deit(dict(state_dict, pos_embed=torch.zeros(1, 65, 64)))
    orphan = {k: v for k, v in state_dict.items() if k != 'blocks.1.mlp.c_fc1.weight'}
    with pytest.raises(KeyError, match='c_fc1'):
        convert_visionllama_deit(orphan)


def test_cli_converts_a_deit_training_checkpoint(tmp_path, monkeypatch, capsys):
    """The tool takes the weights under ``model`` of a deit ``checkpoint.pth`` and prints the architecture."""
    official = _official(mlp='gelu')
    src, dst = tmp_path / 'checkpoint.pth', tmp_path / 'converted.pth'
    torch.save({'model': official.state_dict(), 'epoch': 799, 'optimizer': {'state': {}}}, src)
    monkeypatch.setattr(sys, 'argv', [str(CONVERTER), str(src), str(dst)])
    runpy.run_path(str(CONVERTER), run_name='__main__')
    out = capsys.readouterr().out
    assert 'deit format' in out and 'ffn_type="gelu"' in out
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['architecture']['format'] == 'deit'
    model = _classifier(ffn_type='gelu')
    model.load_state_dict(saved['state_dict'], strict=True)
    images = torch.randn(1, 3, TINY['img_size'], TINY['img_size'])
    with torch.no_grad():
        assert (official(images) - model(images, mode='tensor')).abs().max() < TOLERANCE
