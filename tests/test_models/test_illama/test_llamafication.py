"""The LLaMAfication ladder (paper Table 17, Appendix D): one config per rung, Tiny and Base. Each rung is its
predecessor with exactly the one component that Table 17 names changed (every other resolved setting equal), its
model has the parts that component names, the last rung is the iLLaMA config, and the collapse of the causal rung
(class token first) and its fix (post-sequence class token) show on a tiny model."""
import copy
import inspect
import re
from functools import lru_cache
from pathlib import Path

import pytest
import torch
from mmcv.cnn.bricks.transformer import FFN
from mmengine.config import Config
from torch import nn

from build_utils import build_on_meta
from mmcausal.models.illama import ILLaMA
from mmcausal.models.layers import RMSNorm, SwiGLUFFN

CONFIGS = Path(__file__).resolve().parents[3] / 'configs' / 'illama'
RUNGS = ('vit', 'swiglu', 'rmsnorm', 'causal', 'ps-cls', 'rope', 'rope-lpe', 'aug', 'softmask')
SIZES = ('tiny', 'base')
#: the backbone arguments the ladder switches (with the iLLaMA defaults of ILLaMA.__init__)
SWITCHES = ('ffn_type', 'norm_cfg', 'mask_mode', 'cls_position', 'use_rope', 'use_pos_embed')
#: Table 17 per rung: the settings its component changes (see ``settings``); the rest stays the predecessor's
CHANGES = {
    'swiglu': lambda size: dict(ffn='swiglu'),  # Sec. 3.1
    'rmsnorm': lambda size: dict(norm='RMSNorm'),  # Sec. 3.2
    'causal': lambda size: dict(attention='causal'),  # Sec. 3.3, Eq. 1
    'ps-cls': lambda size: dict(cls='last'),  # Sec. 3.3, PS [cls]
    'rope': lambda size: dict(rope=True, lpe=False),  # Sec. 3.4: RoPE instead of the LPE
    'rope-lpe': lambda size: dict(lpe=True),  # Sec. 3.4: both
    'aug': lambda size: dict(augments=dict(tiny=(0.1, 0.1), base=(0.95, 1.0))[size]),  # Sec. 3.5
    # Sec. 3.6: Eq. 2 (the released code's formulation) and its schedule; for Tiny with the 5 warm-up epochs of
    # its 75.0 ("a lower learning rate warmup helps iLLaMA-T/16 achieve 75.0%")
    'softmask': lambda size: dict(attention='official',
                                  soft_mask=dict(tiny=('constant', 50), base=('linear', 25))[size],
                                  **dict(tiny=dict(warmup=5), base={})[size]),
}
#: Table 17 "ViT" with the basic recipe (Table 12): GELU MLP, LN, bidirectional, class token first, LPE, mixup
#: 0.8 / cutmix 1.0, no soft mask, 50 warm-up epochs
VIT = dict(ffn='gelu', norm='LN', attention='bidirectional', cls='first', rope=False, lpe=True, augments=(0.8, 1.0),
           soft_mask=None, warmup=50)
DEFAULTS = {name: param.default for name, param in inspect.signature(ILLaMA).parameters.items()}


def name(size: str, rung: str) -> str:
    return f'illama-{size}-p16_llamafication-{rung}_32xb128_in1k.py'


@lru_cache(maxsize=None)
def _load(filename: str) -> dict:
    return Config.fromfile(str(CONFIGS / filename)).to_dict()


def load(filename: str) -> dict:
    return copy.deepcopy(_load(filename))


def settings(cfg: dict) -> tuple:
    """``(the Table 17 settings, everything else)`` of a resolved config; backbone switches the config leaves out take
    the backbone's defaults."""
    backbone = cfg['model']['backbone']
    switches = {key: backbone.pop(key, DEFAULTS[key]) for key in SWITCHES}
    norm_cfg = switches['norm_cfg'] or dict(type='RMSNorm', eps=1e-6)
    assert norm_cfg['eps'] == 1e-6
    augments = cfg['model'].pop('train_cfg')['augments']
    assert [a['type'] for a in augments] == ['Mixup', 'CutMix']
    hooks = cfg.pop('custom_hooks')
    assert len(hooks) <= 1
    schedule = cfg.pop('param_scheduler')
    warmup = cfg.pop('warmup_epochs')
    assert schedule[0]['end'] == schedule[1]['begin'] == warmup
    table = dict(ffn=switches['ffn_type'], norm=norm_cfg['type'], attention=switches['mask_mode'],
                 cls=switches['cls_position'], rope=switches['use_rope'], lpe=switches['use_pos_embed'],
                 augments=tuple(a['alpha'] for a in augments), warmup=warmup,
                 soft_mask=(hooks[0]['schedule'], hooks[0]['cutoff']) if hooks else None)
    if hooks:
        assert (hooks[0]['type'], hooks[0]['start'], hooks[0]['by_epoch']) == ('SoftMaskHook', 1.0, True)
    for entry in schedule:
        entry.pop('end', None), entry.pop('begin', None)
    return table, dict(cfg, schedule=schedule)


@pytest.mark.parametrize('size', SIZES)
def test_first_rung_is_vit_with_the_basic_recipe(size):
    table, rest = settings(load(name(size, 'vit')))
    assert table == VIT
    _, illama_rest = settings(load(f'illama-{size}-p16_32xb128_in1k.py'))
    assert rest == illama_rest  # data, optimizer, drop path, epochs, head: the iLLaMA config's (Table 12 = Table 13)


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('rung', RUNGS[1:])
def test_each_rung_changes_one_component(size, rung):
    previous = RUNGS[RUNGS.index(rung) - 1]
    before, before_rest = settings(load(name(size, previous)))
    after, after_rest = settings(load(name(size, rung)))
    assert after == {**before, **CHANGES[rung](size)}
    assert after != before and after_rest == before_rest


@pytest.mark.parametrize('size', SIZES)
def test_last_rung_is_the_illama_config(size):
    assert settings(load(name(size, 'softmask'))) == settings(load(f'illama-{size}-p16_32xb128_in1k.py'))


def _model(filename: str) -> nn.Module:
    return build_on_meta(Config(load(filename)), 'mmpretrain')


#: state-dict keys (blocks as ``layers.*``) each rung removes and adds: the weights change only with the FFN, the
#: norm and the position table
KEYS = {
    'swiglu': ({'layers.*.ffn.layers.0.0.weight', 'layers.*.ffn.layers.0.0.bias', 'layers.*.ffn.layers.1.weight',
                'layers.*.ffn.layers.1.bias'}, {'layers.*.ffn.w12.weight', 'layers.*.ffn.w3.weight'}),
    'rmsnorm': ({'layers.*.norm1.bias', 'layers.*.norm2.bias', 'backbone.norm.bias'}, set()),
    'rope': ({'backbone.pos_embed'}, set()),
    'rope-lpe': (set(), {'backbone.pos_embed'}),
}


def _keys(model: nn.Module) -> set:
    return {re.sub(r'^backbone\.layers\.\d+\.', 'layers.*.', key) for key in model.state_dict()}


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('rung', RUNGS)
def test_every_rung_builds_the_parts_it_names(size, rung):
    model = _model(name(size, rung))
    table, _ = settings(load(name(size, rung)))
    backbone = model.backbone
    block = backbone.layers[0]
    assert isinstance(block.ffn, dict(gelu=FFN, swiglu=SwiGLUFFN)[table['ffn']])
    norm = dict(LN=nn.LayerNorm, RMSNorm=RMSNorm)[table['norm']]
    assert all(type(m) is norm for m in (block.norm1, block.norm2, backbone.norm))
    assert (backbone.mask_mode, backbone.cls_position) == (table['attention'], table['cls'])
    assert (backbone.rope is not None, backbone.pos_embed is not None) == (table['rope'], table['lpe'])
    if rung != 'vit':
        previous = _keys(_model(name(size, RUNGS[RUNGS.index(rung) - 1])))
        assert (previous - _keys(model), _keys(model) - previous) == KEYS.get(rung, (set(), set()))


#: timm's ViT-Ti/16 and ViT-B/16; iLLaMA-T / B (the official logs' n_parameters)
PARAMETERS = dict(tiny=(5_717_416, 5_701_096), base=(86_567_656, 86_502_376))


@pytest.mark.parametrize('size', SIZES)
def test_the_ladder_goes_from_vit_to_the_illama_model(size):
    vit, illama = (_model(name(size, rung)) for rung in ('vit', 'softmask'))
    assert [sum(p.numel() for p in m.parameters()) for m in (vit, illama)] == list(PARAMETERS[size])
    reference = _model(f'illama-{size}-p16_32xb128_in1k.py')
    assert list(illama.state_dict()) == list(reference.state_dict())
    assert repr(illama) == repr(reference)


def _tiny_rung(rung: str) -> ILLaMA:
    """The Tiny rung's backbone at 2 blocks of width 32 and 32 px (the settings of the config but the size)."""
    cfg = load(name('tiny', rung))['model']['backbone']
    cfg.update(arch=dict(embed_dims=32, num_layers=2, num_heads=2), img_size=32)
    cfg.pop('type')
    torch.manual_seed(0)
    model = ILLaMA(**cfg)
    model.init_weights()
    return model.eval()


@pytest.mark.parametrize('rung,sees_the_image', [('rmsnorm', True), ('causal', False), ('ps-cls', True)])
def test_causal_attention_with_the_class_token_first_collapses(rung, sees_the_image):
    """Sec. 3.3: under the causal mask a first class token attends only to itself, so the feature the head reads
    is the same for every image (Table 17: 0.1 top-1); after it (PS [cls]) or without the mask it depends on it."""
    model = _tiny_rung(rung)
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        cls = model(images)[0]
    assert torch.allclose(cls[0], cls[1]) != sees_the_image


def test_class_token_first_is_read_from_the_first_slot():
    model = _tiny_rung('vit')
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        cls = model(images)[0]
        model.out_type = 'raw'
        raw = model(images)[0]
    assert raw.shape == (2, 4 + 1, 32)
    torch.testing.assert_close(cls, raw[:, 0])


@pytest.mark.parametrize('kwargs,match', [(dict(ffn_type='relu'), "Unknown ILLaMA ffn_type 'relu'"),
                                          (dict(cls_position='middle'), "Unknown ILLaMA cls_position 'middle'")])
def test_bad_switches_say_what_to_choose(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ILLaMA(arch=dict(embed_dims=32, num_layers=1, num_heads=2), **kwargs)
