"""LayerDecayOptimWrapperConstructor: per-layer learning rates for classifiers, segmentors and detectors."""
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope

from mmcausal.registry import MODELS

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {
    'mmpretrain': 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py',
    'mmseg': 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py',
    'mmdet': 'configs/illama/mask-rcnn_illama-nano-p16_sfp_1xb4-36e_shapes-128px.py',
}
RATE, BASE_LR, DEPTH = 0.5, 1e-3, 4  # the tiny configs' backbones have 4 blocks


def _groups_by_name(library: str, **paramwise):
    cfg = Config.fromfile(str(ROOT / CONFIGS[library]))
    init_default_scope(library)
    model = MODELS.build(cfg.model)
    optim_wrapper = build_optim_wrapper(model, dict(
        constructor='LayerDecayOptimWrapperConstructor', optimizer=dict(type='AdamW', lr=BASE_LR,
                                                                       weight_decay=0.05),
        paramwise_cfg=dict(layer_decay_rate=RATE, **paramwise)))
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(g['params'][0])]: g for g in optim_wrapper.optimizer.param_groups}


@pytest.mark.parametrize('library', list(CONFIGS))
def test_learning_rate_decays_from_the_last_block_to_the_stem(library):
    groups = _groups_by_name(library)
    lr = {name: group['lr'] for name, group in groups.items()}
    # num_layers = DEPTH + 2 ids: stem 0, blocks 1..DEPTH, the rest DEPTH + 1 (full rate).
    assert lr['backbone.pos_embed'] == pytest.approx(BASE_LR * RATE**(DEPTH + 1))
    assert lr['backbone.patch_embed.projection.weight'] == pytest.approx(BASE_LR * RATE**(DEPTH + 1))
    for block in range(DEPTH):
        assert lr[f'backbone.layers.{block}.attn.qkv.weight'] == pytest.approx(BASE_LR * RATE**(DEPTH - block))
    head = next(name for name in lr if not name.startswith('backbone.'))
    assert lr[head] == pytest.approx(BASE_LR)


def test_paramwise_rules_still_apply():
    groups = _groups_by_name('mmpretrain', flat_decay_mult=0.0, custom_keys={'.cls_token': dict(decay_mult=0.)})
    assert groups['backbone.layers.0.norm1.weight']['weight_decay'] == 0.0
    assert groups['backbone.cls_token']['weight_decay'] == 0.0
    assert groups['backbone.layers.0.attn.qkv.weight']['weight_decay'] == pytest.approx(0.05)
    assert groups['backbone.layers.0.norm1.weight']['lr'] == pytest.approx(BASE_LR * RATE**DEPTH)


def test_invalid_rate_is_rejected():
    from mmcausal.engine import LayerDecayOptimWrapperConstructor
    with pytest.raises(ValueError, match='layer_decay_rate'):
        LayerDecayOptimWrapperConstructor(dict(optimizer=dict(type='AdamW', lr=1.)), dict(layer_decay_rate=0.))
