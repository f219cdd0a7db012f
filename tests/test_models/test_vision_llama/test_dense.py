"""VisionLLaMA dense-prediction recipes: UperNet on ADE20K (paper D.6) and ViTDet Mask R-CNN on COCO (paper D.9).

The tiny CPU twins run through the upstream mmseg/mmdet ``tools/train.py`` in ``test_tools.py`` (that they learn, on
an independent draw, in ``test_twin_transfer.py``). The full-size configs build (on the meta device) with the specified
layer-decay rates and window/global blocks, and run on small inputs.
"""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

from mmcausal.registry import MODELS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
SEG_FULL = 'vision_llama/upernet_vision-llama-base-p16_8xb2-160k_ade20k-512x512.py'
DET_FULL = 'vision_llama/vitdet_mask-rcnn_vision-llama-base-p16_sfp_16xb4-lsj-36e_coco.py'


def _build(relative_path: str, scope: str):
    """The full-size model (PyTorch default init, no checkpoint; ~3 s on CPU) in eval mode, and its config."""
    cfg = Config.fromfile(str(ROOT / 'configs' / relative_path))
    cfg.model.backbone.init_cfg = None
    init_default_scope(scope)
    return MODELS.build(cfg.model).eval(), cfg


def _lr_scales(model, optim_wrapper_cfg):
    cfg = dict(optim_wrapper_cfg, type='OptimWrapper')  # AmpOptimWrapper needs a GPU; the groups are the same
    optimizer = build_optim_wrapper(model, cfg).optimizer
    names = {id(p): n for n, p in model.named_parameters()}
    base_lr = optim_wrapper_cfg['optimizer']['lr']
    return {names[id(g['params'][0])]: (g['lr'] / base_lr, g['weight_decay']) for g in optimizer.param_groups}


def test_vitdet_recipe_layer_decay_and_windows():
    model, cfg = _build(DET_FULL, 'mmdet')
    backbone = model.backbone
    assert type(backbone).__name__ == 'VisionLLaMA' and backbone.num_layers == 12 and backbone.embed_dims == 768
    assert [getattr(layer.attn, 'window_size', 0) for layer in backbone.layers] == \
        [0 if i in (2, 5, 8, 11) else 14 for i in range(12)]
    assert backbone.out_indices == [11] and not backbone.final_norm and backbone.cls_token is None
    assert backbone.rope_mode == '2d' and backbone.patch_resolution == (64, 64)
    assert type(model.neck).__name__ == 'SimpleFeaturePyramid' and model.neck.num_outs == 5
    with torch.no_grad():  # a 20x16 grid: 14x14 windows pad it to 28x28
        features = model.extract_feat(torch.randn(1, 3, 320, 256))
    assert [tuple(f.shape) for f in features] == [(1, 256, 80 // 2**i, 64 // 2**i) for i in range(5)]

    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.constructor == 'LayerDecayOptimWrapperConstructor'
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.type, optimizer.lr, optimizer.betas, optimizer.weight_decay) == ('AdamW', 1e-4, (0.9, 0.999),
                                                                                       0.1)
    assert cfg.train_dataloader.batch_size * 16 == 64
    assert cfg.train_cfg.max_iters == round(36 * 118287 / 64)
    assert cfg.param_scheduler[1].milestones == [round(27 * 118287 / 64), round(33 * 118287 / 64)]

    scales = _lr_scales(model, cfg.optim_wrapper)
    assert scales['backbone.patch_embed.projection.weight'][0] == pytest.approx(0.7**13)
    for i in range(12):
        assert scales[f'backbone.layers.{i}.attn.qkv.weight'][0] == pytest.approx(0.7**(12 - i))
        assert scales[f'backbone.layers.{i}.ffn.w12.weight'][0] == pytest.approx(0.7**(12 - i))
    others = {name: value for name, value in scales.items() if not name.startswith('backbone.')}
    assert any(n.startswith('neck.') for n in others) and any(n.startswith('roi_head.') for n in others)
    assert all(scale == 1.0 for scale, _ in others.values())
    # no weight decay on norms and biases, 0.1 elsewhere
    assert scales['backbone.layers.0.norm1.weight'][1] == scales['backbone.layers.0.attn.qkv.bias'][1] == 0.
    assert scales['roi_head.bbox_head.shared_convs.0.ln.weight'][1] == 0.
    assert scales['backbone.layers.0.attn.qkv.weight'][1] == pytest.approx(0.1)


def test_upernet_recipe_layer_decay():
    model, cfg = _build(SEG_FULL, 'mmseg')
    backbone = model.backbone
    assert type(backbone).__name__ == 'VisionLLaMA' and backbone.patch_resolution == (32, 32)
    assert backbone.out_indices == [3, 5, 7, 11] and backbone.window_size == 0 and backbone.rope_mode == '2d'
    assert backbone.layers[0].ffn.w12.weight.shape == (2 * 8192, 768)  # official MAE layout
    assert type(model.neck).__name__ == 'Feature2Pyramid'
    with torch.no_grad():  # decode-head logits at stride 4
        assert model(torch.randn(1, 3, 128, 160), mode='tensor').shape == (1, 150, 32, 40)
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    optimizer = cfg.optim_wrapper.optimizer
    assert (optimizer.lr, optimizer.betas, optimizer.weight_decay) == (6e-5, (0.9, 0.999), 0.05)
    assert [s.type for s in cfg.param_scheduler] == ['LinearLR', 'PolyLR'] and cfg.param_scheduler[0].end == 1500
    scales = _lr_scales(model, cfg.optim_wrapper)
    assert scales['backbone.patch_embed.projection.weight'][0] == pytest.approx(0.65**13)
    assert scales['backbone.layers.0.attn.qkv.weight'][0] == pytest.approx(0.65**12)
    assert scales['backbone.layers.11.attn.qkv.weight'][0] == pytest.approx(0.65)
    assert scales['decode_head.conv_seg.weight'][0] == 1.0
    assert scales['backbone.layers.3.norm2.bias'][1] == 0.
