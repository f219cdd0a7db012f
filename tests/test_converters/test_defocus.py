"""defocus2mmcausal: official classification files (model / model_ema beside a pickled yacs config, MLP heads, the
22k -> 1k head slice) and detection files (flat backbone, or a whole DINO detector with its simple feature pyramid)
-> mmcausal checkpoints."""
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

from foreign_pickles import save_with_config_node
from mmcausal.converters import convert_defocus, load_source_state_dict
from mmcausal.converters.defocus import DINO_PARTS
from mmcausal.registry import MODELS
from reference.official_defocus import DefocusMambaOfficial
from reference.official_simple_fpn import SimpleFPNOfficial
from zygote import run_python

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
    return run_python([sys.executable, str(CONVERTER), *options, str(src), str(dst)], cwd=ROOT, timeout=300)


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
    if prefix:  # a whole detector: its neck is renamed, its DINO parts keep their names
        expected |= {'neck.branches.0.0.weight', 'bbox_head.cls_branches.0.weight', 'query_embedding.weight'}
    assert set(converted) == expected
    torch.testing.assert_close(converted['backbone.patch_embed.projection.weight'], official['patch_embed.proj.weight'])


def _official_neck(seed, channels=64, out_channels=32):
    torch.manual_seed(seed)
    neck = SimpleFPNOfficial(channels, out_channels).eval()
    with torch.no_grad():
        for param in neck.parameters():  # LN2d weights away from 1 and biases away from 0
            param.add_(torch.randn_like(param) * 0.05)
    return neck


def test_detection_neck_converts_onto_our_simple_feature_pyramid():
    official = _official_neck(0)
    detector = {f'neck.{k}': v for k, v in official.state_dict().items()}
    assert {k for k in detector if '.norm_layer.' in k}  # mmcv's name for the LN2d inside a ConvModule
    converted = convert_defocus(detector)
    assert {m.eps for m in official.modules() if type(m).__name__ == 'LN2d'} == {1e-5}  # mmcv's, not LN2d's 1e-6
    # the neck of the De-focus DINO configs
    cfg = Config.fromfile(str(ROOT / 'configs/defocus/dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py'))
    neck_cfg = dict(cfg.model.neck, in_channels=64, out_channels=32)
    ours = MODELS.build(neck_cfg).eval()
    ours.load_state_dict({k[len('neck.'):]: v for k, v in converted.items()}, strict=True)
    features = torch.randn(2, 64, 5, 7, dtype=torch.float64)  # odd sizes: the stride-32 level floors, in both
    with torch.no_grad():  # float64: the two LN2d formulas then agree to rounding
        for level, (mine, theirs) in enumerate(zip(ours.double()([features]), official.double()(features),
                                                   strict=True)):
            assert mine.shape == theirs.shape and (mine - theirs).abs().max() < 1e-9, level
    with pytest.raises(KeyError, match='Unexpected neck key'):
        convert_defocus({'neck.fpn1.2.weight': torch.zeros(1)})  # fpn1.2 is the GELU


def _dino_detector(seed):
    """The DINO detector of the De-focus COCO configs at test size: the recipe's neck (strides 4-32), a 2-block
    backbone shaped like the official oracle, the twin's small DINO."""
    cfg = Config.fromfile(str(ROOT / 'configs/defocus/dino-4scale_defocus-mamba-nano-p8_sfp_1xb4-45e_shapes-128px.py'))
    full = Config.fromfile(str(ROOT / 'configs/defocus/dino-4scale_defocus-mamba-base-p16_sfp_8xb2-12e_coco.py'))
    cfg.model.backbone.arch = dict(embed_dims=64, num_layers=2)
    cfg.model.backbone.patch_size = 16
    cfg.model.neck = dict(full.model.neck, in_channels=64)
    init_default_scope('mmdet')
    torch.manual_seed(seed)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.eval()


def test_whole_official_dino_detector_loads_strictly(tmp_path):
    backbone = {k.replace('patch_embed.proj.', 'patch_embed.projection.'): v
                for k, v in _official(0).state_dict().items() if not k.startswith('head')}
    neck = _official_neck(1, out_channels=256).state_dict()
    # the official detector's DINO is mmdet's own module, so another build of it has the official names
    dino = {k: v for k, v in _dino_detector(2).state_dict().items() if not k.startswith(('backbone.', 'neck.'))}
    assert {k.split('.')[0] for k in dino} == {'bbox_head', 'encoder', 'decoder', 'query_embedding', 'level_embed',
                                                'memory_trans_fc', 'memory_trans_norm', 'dn_query_generator'}
    assert all(k.startswith(DINO_PARTS) for k in dino)
    assert all(any(k.startswith(part) for k in dino) for part in DINO_PARTS)  # no stale prefix
    official = {**{f'backbone.{k}': v for k, v in backbone.items()}, **{f'neck.{k}': v for k, v in neck.items()},
                **dino}
    src, dst = tmp_path / 'defocus_mamba_base_12ep_dino.pth', tmp_path / 'converted.pth'
    torch.save(dict(state_dict=official, meta=dict(epoch=12)), src)
    result = _convert(src, dst)
    assert result.returncode == 0, result.stderr
    converted = torch.load(dst, weights_only=True)['state_dict']

    ours = _dino_detector(3)
    ours.load_state_dict(converted, strict=True)
    mine = ours.state_dict()
    for key, value in dino.items():
        torch.testing.assert_close(mine[key], value, rtol=0, atol=0, msg=key)
    torch.testing.assert_close(mine['neck.output_convs.0.1.weight'], neck['lateral_convs.0.norm_layer.weight'])
    torch.testing.assert_close(mine['backbone.layers.1.attn.A_log'], backbone['blocks.1.mixer.A_log'])


def test_unknown_keys_and_missing_ema_are_explained(tmp_path):
    with pytest.raises(KeyError, match='official De-focus Mamba'):
        convert_defocus({'blocks.0.attn.qkv.weight': torch.zeros(1)})
    src = tmp_path / 'no_ema.pth'
    torch.save(dict(model=_official(0).state_dict()), src)
    result = _convert(src, tmp_path / 'out.pth', '--ema')
    assert result.returncode == 1 and "has no 'model_ema' weights" in result.stderr
