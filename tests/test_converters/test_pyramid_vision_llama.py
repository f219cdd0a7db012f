"""pyramid_visionllama2mmcausal: official deit checkpoint -> mmcausal, with the official logits and feature maps.

The official model is :mod:`reference.official_pyramid_visionllama`, an independent re-statement of the released
``PyramidVisionLLaMA`` forward (official parameter names, complex RoPE, the GSA key-position formula, unmasked
LSA padding, the classifier's double final norm) written from the official ``deit/my_models.py``.
"""
import argparse
import runpy
import sys
from pathlib import Path

import pytest
import torch
from mmengine.registry import init_default_scope

from mmcausal.converters import convert_pyramid_visionllama
from mmcausal.models.vision_llama import PyramidVisionLLaMA
from mmcausal.registry import MODELS
from reference.official_pyramid_visionllama import OfficialPyramidVisionLLaMA, randomize_

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/pyramid_visionllama2mmcausal.py'
TOLERANCE = 1e-4  # max abs difference, fp32
#: the backbone settings that reproduce the released weights (``deit/my_models.py``): official GSA keys, unmasked
#: LSA padding
OFFICIAL = dict(gsa_key_pos='official', mask_window_padding=False)
CLASSIFIER = dict(OFFICIAL, out_type='avg_featmap', out_indices=-1, norm_after_stage=False, final_norm=True,
                  official_double_norm=True)
#: the official dense fine-tuning (mmseg/mmdet): a new norm after every stage, AS2DRoPE anchored at 14 tokens
DENSE = dict(OFFICIAL, rope_mode='as2d', rope_anchor=14, as2d_scaling='isotropic', norm_after_stage=True,
             final_norm=False)


def _official(arch, seed=0, **kwargs):
    torch.manual_seed(seed)
    return randomize_(OfficialPyramidVisionLLaMA(arch, **kwargs).eval(), seed=seed)


def _classifier(arch, state_dict):
    init_default_scope('mmpretrain')
    dims = {'small': 512, 'base': 768}[arch]
    model = MODELS.build(dict(type='ImageClassifier', backbone=dict(type='PyramidVisionLLaMA', arch=arch, **CLASSIFIER),
                              head=dict(type='LinearClsHead', num_classes=1000, in_channels=dims))).eval()
    model.load_state_dict(state_dict, strict=True)
    return model


@pytest.mark.parametrize('arch', ['small', 'base'])
def test_converted_classifier_gives_the_official_logits_at_224(arch):
    official = _official(arch)
    model = _classifier(arch, convert_pyramid_visionllama(official.state_dict()))
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        expected = official(images)
        logits = model(images, mode='tensor')
    assert expected.std() > 0.1, 'the oracle produces informative logits'
    assert (logits - expected).abs().max() < TOLERANCE


@pytest.mark.parametrize('size', [(512, 512), (512, 384)])
def test_converted_dense_backbone_gives_the_official_maps(size):
    """norm_after_stage, official GSA keys and auto-scale on (s = 14 / H per stage), square and non-square."""
    official = _official('small', dense=True, auto_scale=True)
    converted = convert_pyramid_visionllama(official.state_dict())
    backbone = PyramidVisionLLaMA('small', **DENSE).eval()
    backbone.load_state_dict({k[len('backbone.'):]: v for k, v in converted.items()}, strict=True)
    images = torch.randn(1, 3, *size)
    with torch.no_grad():
        expected, outs = official(images), backbone(images)
    assert [tuple(o.shape) for o in outs] == [tuple(e.shape) for e in expected]
    for out, ref in zip(outs, expected):
        assert (out - ref).abs().max() < TOLERANCE
    fixed = PyramidVisionLLaMA('small', **dict(DENSE, gsa_key_pos='fixed')).eval()
    fixed.load_state_dict(backbone.state_dict())
    with torch.no_grad():
        assert (fixed(images)[0] - outs[0]).abs().max() > 1e-3, 'the fixed key positions are another model'


def test_checkpoints_without_layer_scale_load_into_layer_scale_off():
    state = {k: v for k, v in _official('small').state_dict().items() if 'gamma' not in k}
    converted = convert_pyramid_visionllama(state)
    model = PyramidVisionLLaMA('small', layer_scale_init_value=0., **CLASSIFIER)
    model.load_state_dict({k[len('backbone.'):]: v for k, v in converted.items() if k.startswith('backbone.')},
                          strict=True)


def test_unknown_keys_and_half_swiglus_are_rejected():
    state = _official('small').state_dict()
    with pytest.raises(KeyError, match='pos_embed'):
        convert_pyramid_visionllama({**state, 'pos_embed': torch.zeros(1)})
    with pytest.raises(KeyError, match='c_fc2'):
        convert_pyramid_visionllama({k: v for k, v in state.items() if k != 'blocks.0.0.mlp.c_fc1.weight'})


def test_the_cli_reads_a_deit_checkpoint_without_running_its_pickles(tmp_path, monkeypatch, capsys):
    official = _official('small')
    src, dst = tmp_path / 'best_checkpoint.pth', tmp_path / 'out' / 'pvl-small.pth'
    torch.save({'model': official.state_dict(), 'epoch': 299, 'args': argparse.Namespace(lr=1e-3)}, src)
    monkeypatch.setattr(sys, 'argv', [str(CONVERTER), str(src), str(dst)])
    runpy.run_path(str(CONVERTER), run_name='__main__')
    assert 'Saved' in capsys.readouterr().out
    saved = torch.load(dst, weights_only=True)
    model = _classifier('small', saved['state_dict'])
    images = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        assert (model(images, mode='tensor') - official(images)).abs().max() < TOLERANCE
