"""The Python API: every model class is importable from ``mmcausal.models``, and the snippet of
``docs/python_api.md`` (build a backbone, load a converted classifier checkpoint whose keys carry the ``backbone.``
prefix, get feature maps) works as written."""
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.runner import load_checkpoint

import mmcausal.models
from mmcausal.registry import MODELS

TWIN = 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py'


def test_every_model_class_is_exported_from_mmcausal_models():
    """Backbones, heads, necks and self-supervised models (not the shared layers) are one import away."""
    ours = {name: cls for name, cls in MODELS.module_dict.items()
            if cls.__module__.startswith('mmcausal.models.')
            and not cls.__module__.startswith('mmcausal.models.layers')}
    assert {'VisionLLaMA', 'ILLaMA', 'CaiT', 'MAEVisionLLaMA', 'SimpleFeaturePyramid'} <= set(ours)
    for name, cls in ours.items():
        assert getattr(mmcausal.models, name, None) is cls, f'from mmcausal.models import {name} fails'
        assert name in mmcausal.models.__all__


def test_backbone_loads_a_classifier_checkpoint_and_returns_feature_maps(tmp_path):
    cfg = Config.fromfile(TWIN)
    init_default_scope('mmpretrain')
    classifier = MODELS.build(cfg.model)
    checkpoint = tmp_path / 'classifier.pth'
    torch.save(dict(state_dict=classifier.state_dict()), checkpoint)  # keys: backbone.*, head.*

    # the documented lines (docs/python_api.md), at the twin's size
    backbone_args = {key: value for key, value in cfg.model.backbone.items() if key not in ('type', 'init_cfg')}
    backbone = mmcausal.models.VisionLLaMA(**{**backbone_args, 'out_type': 'featmap', 'out_indices': (1, 3)})
    load_checkpoint(backbone, str(checkpoint), map_location='cpu', revise_keys=[(r'^backbone\.', '')])
    backbone.eval()
    with torch.no_grad():
        features = backbone(torch.rand(2, 3, 64, 64))

    assert [tuple(f.shape) for f in features] == [(2, 64, 8, 8)] * 2
    expected = classifier.state_dict()
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value, expected[f'backbone.{key}'], rtol=0, atol=0, msg=key)
