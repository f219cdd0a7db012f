"""dit2mmcausal and the converted networks' equivalence: official-layout DiT / SiT / DiT-LLaMA / SiT-LLaMA weights
(random, in an oracle written from the official code) converted into a DiffusionTransformer give the oracle's outputs,
plain and through the official 3-channel guided forward."""
import argparse
import runpy
import sys
from pathlib import Path

import pytest
import torch

from mmcausal.converters import convert_dit, describe_dit
from mmcausal.models import DiffusionTransformer
from reference.official_dit import SIZES, build_official, randomize_

pytestmark = pytest.mark.usefixtures('single_thread')

ROOT = Path(__file__).resolve().parents[2]
CONVERTER = ROOT / 'tools/model_converters/dit2mmcausal.py'
ATOL = 1e-4
NULL = 1000


@pytest.mark.parametrize('name,expected', [
    ('DiT-LLaMA-B/4', 130_429_568), ('DiT-LLaMA-L/4', 464_222_336), ('DiT-LLaMA-XL/2', 674_968_352),
    ('SiT-LLaMA-S/2', 32_940_320), ('DiT-XL/2', 675_129_632), ('DiT-B/4', 130_475_648)])
def test_oracle_parameter_counts_equal_the_official_ones(name, expected):
    with torch.device('meta'):
        model = build_official(name)
    assert sum(param.numel() for param in model.parameters()) == expected


def converted_network(name, official, **kwargs):
    """Our network for the oracle ``official`` (same width, its depth) with the converted weights loaded strictly."""
    arch, patch = name.rsplit('-', 1)[1].split('/')
    hidden, _, heads = SIZES[arch]
    model = DiffusionTransformer(dict(embed_dims=hidden, num_layers=len(official.blocks), num_heads=heads),
                                 patch_size=int(patch), block='llama' if 'LLaMA' in name else 'dit', **kwargs)
    state = {key[len('network.'):]: value for key, value in convert_dit(official.state_dict()).items()}
    model.load_state_dict(state, strict=True)
    return model.eval()


def inputs(sit: bool, batch: int = 2):
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(batch, 4, 32, 32, generator=generator)
    t = torch.rand(batch, generator=generator) if sit else torch.randint(0, 1000, (batch, ), generator=generator)
    y = torch.randint(0, 1000, (batch, ), generator=generator)
    return x, t, y


@pytest.mark.parametrize('name', ['DiT-LLaMA-B/4', 'SiT-LLaMA-S/2', 'DiT-B/4'])
@pytest.mark.parametrize('rope_mode', ['2d', 'as2d'])
def test_converted_weights_give_the_oracle_outputs_plain_and_guided(name, rope_mode):
    """Full widths, 2 blocks (the full depths repeat the same block); fp32 max |diff| < 1e-4. SiT's forward returns
    the velocity only: our network keeps all 8 channels and the transport objective reads the first 4."""
    torch.manual_seed(0)
    official = randomize_(build_official(name, depth=2).eval())
    ours = converted_network(name, official, rope_mode=rope_mode)
    sit = name.startswith('SiT')
    x, t, y = inputs(sit)
    with torch.no_grad():
        expected = official(x, t, y)
        out = ours(x, t, y)[:, :expected.shape[1]]
        assert (out - expected).abs().max() < ATOL
        assert expected.abs().mean() > 0.05  # a real signal, not zeros
        # the official guided forward: doubled batch (its second half of x is ignored), labels [y; null]
        doubled = torch.cat((x, torch.randn_like(x)))
        labels = torch.cat((y, torch.full_like(y, NULL)))
        official_guided = official.forward_with_cfg(doubled, torch.cat((t, t)), labels, 1.5)[:len(x)]
        guided = ours.forward_with_cfg(x, t, y, 1.5, cfg_channels=3)[:, :official_guided.shape[1]]
        assert (guided - official_guided).abs().max() < ATOL
        assert (guided - out).abs().max() > 1e-3  # guidance changed something


def test_key_map_and_what_is_dropped():
    official = randomize_(build_official('DiT-LLaMA-B/4', depth=2))
    converted = convert_dit(official.state_dict())
    assert 'network.pos_embed' not in converted
    source = official.state_dict()
    torch.testing.assert_close(converted['network.layers.1.ffn.w12.weight'],
                               torch.cat((source['blocks.1.mlp.c_fc1.weight'], source['blocks.1.mlp.c_fc2.weight'])))
    assert torch.equal(converted['network.patch_embed.projection.weight'], source['x_embedder.proj.weight'])
    info, text = describe_dit(converted, num_tokens=64)
    assert info == dict(block='llama', arch=None, embed_dims=768, num_layers=2, num_heads=None, patch_size=4,
                        in_channels=4, learn_sigma=True, num_classes=1000, input_size=32)
    with torch.device('meta'):  # shapes only (a meta pos_embed has no values to check: left out)
        full = convert_dit({k: v for k, v in build_official('DiT-XL/2').state_dict().items() if k != 'pos_embed'})
    info, text = describe_dit(full, num_tokens=256)
    assert (info['arch'], info['num_heads'], info['block']) == ('xlarge', 16, 'dit')
    assert "arch='xlarge', patch_size=2, block='dit'" in text


def test_a_dit_table_that_is_not_the_sincos_table_and_unknown_keys_are_refused():
    state = build_official('DiT-B/4', depth=1).state_dict()
    state['pos_embed'] = state['pos_embed'] + 0.01
    with pytest.raises(ValueError, match='not the fixed 2-D sin-cos table'):
        convert_dit(state)
    with pytest.raises(KeyError, match="'head.weight'"):
        convert_dit({'head.weight': torch.zeros(1)})


def _cli(monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, 'argv', [str(CONVERTER), *map(str, argv)])
    runpy.run_path(str(CONVERTER), run_name='__main__')
    return capsys.readouterr().out


def test_cli_reads_flat_and_train_files_and_picks_ema_or_model(tmp_path, monkeypatch, capsys):
    ema = randomize_(build_official('SiT-LLaMA-S/2', depth=1), seed=1).state_dict()
    live = randomize_(build_official('SiT-LLaMA-S/2', depth=1), seed=2).state_dict()
    torch.save(ema, tmp_path / 'flat.pt')
    torch.save(dict(model=live, ema=ema, opt=dict(state={}, param_groups=[]),
                    args=argparse.Namespace(model='SiTLLaMA-S/2', global_seed=0)), tmp_path / 'train.pt')
    key = 'network.final_layer.linear.weight'
    for source, options, expected in (('flat.pt', (), ema), ('train.pt', (), ema),
                                      ('train.pt', ('--use', 'model'), live)):
        out = _cli(monkeypatch, capsys, *options, tmp_path / source, tmp_path / 'out.pth')
        saved = torch.load(tmp_path / 'out.pth', weights_only=True)
        assert torch.equal(saved['state_dict'][key], expected['final_layer.linear.weight'])
        assert saved['meta']['architecture']['input_size'] == 32 and 'block=\'llama\'' in out
    with pytest.raises(SystemExit, match="has no 'model' weights"):
        _cli(monkeypatch, capsys, '--use', 'model', tmp_path / 'flat.pt', tmp_path / 'out.pth')


@pytest.mark.parametrize('name', ['DiT-LLaMA-B/4', 'SiT-LLaMA-S/2', 'DiT-B/4'])
def test_converted_weights_give_the_oracle_outputs_at_full_depth(name):
    """The three models whole (12 blocks each), plain forward, fp32 max |diff| < 1e-4: the 2-block cases above cover
    every path and guidance; this one covers the depth the released weights have."""
    torch.manual_seed(0)
    official = randomize_(build_official(name).eval())
    assert len(official.blocks) == SIZES[name.rsplit('-', 1)[1].split('/')[0]][1]
    ours = converted_network(name, official)
    x, t, y = inputs(name.startswith('SiT'))
    with torch.no_grad():
        expected = official(x, t, y)
        assert (ours(x, t, y)[:, :expected.shape[1]] - expected).abs().max() < ATOL
        assert expected.abs().mean() > 0.05
