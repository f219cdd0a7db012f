"""FLOPs (:mod:`mmcausal.analysis.complexity`, ``tools/analysis_tools/get_flops.py``): mmengine's analysis with our
handles equals a hand formula, attention included, and the metafiles' values are what the tool computes (a cheap
subset here; ``python tools/analysis_tools/get_flops.py --update-metafiles`` recomputes all of them)."""
from pathlib import Path

import pytest
import torch
import yaml
from mmengine.analysis import FlopAnalyzer
from mmengine.analysis.complexity_analysis import _DEFAULT_SUPPORTED_FLOP_OPS

from analysis_utils import load_tool
from mmcausal.analysis.complexity import flop_analyzer
from mmcausal.models import ILLaMA

ROOT = Path(__file__).resolve().parents[2]
#: Small full-size models of the kinds the tool counts: a classifier, a CaiT (talking heads), two diffusion networks
#: (one with SwiGLU) and a segmentor under its multi-scale test wrapper. Their metafile values are recomputed here.
CHEAP = ('illama-tiny-p16_32xb128_in1k', 'cait-xxs24_8xb128-400e_in1k', 'sit-small-p2_8xb32-400k_in1k-256px',
         'sit-llama-small-p2_8xb32-400k_in1k-256px', 'upernet_illama-tiny-p16_8xb2-160k_ade20k-512x512_ms-test')


@pytest.fixture(scope='module')
def get_flops():
    return load_tool('get_flops')


def metafile_models() -> dict:
    return {model['Name']: model for path in sorted(ROOT.glob('configs/*/metafile.yml'))
            for model in yaml.safe_load(path.read_text())['Models']}


def small_illama() -> ILLaMA:
    return ILLaMA(arch=dict(embed_dims=64, num_layers=2, num_heads=4), img_size=64, patch_size=8).eval()


def test_a_backbone_counts_as_the_hand_formula_attention_included():
    """iLLaMA at 64 px, patch 8: 64 patches + the class token; per block q/k/v and the output projection (4 D^2
    per token), SwiGLU's w12 (D x 2h) and w3 (h x D), SDPA's two products over the full N x N rectangle (2 N^2 D,
    also under the causal mask) and two RMSNorms (5 per element); the patch convolution; a final RMSNorm."""
    model = small_illama()
    tokens, dims, blocks, patches = 65, 64, 2, 64
    hidden = model.layers[0].ffn.w3.in_features
    per_block = tokens * (4 * dims * dims + dims * 2 * hidden + hidden * dims) + 2 * tokens * tokens * dims \
        + 2 * 5 * tokens * dims
    expected = patches * 3 * 8 * 8 * dims + blocks * per_block + 5 * tokens * dims
    with torch.no_grad():
        analyzer = flop_analyzer(model, (torch.zeros(1, 3, 64, 64), )).unsupported_ops_warnings(False)
        assert analyzer.total() == expected
        assert analyzer.by_operator()['scaled_dot_product_attention'] == blocks * 2 * tokens * tokens * dims


def test_mmengine_alone_misses_attention_and_the_fused_projection():
    """mmengine counts no SDPA (nor our autograd functions): without our handles the count lacks exactly them; if
    mmengine ever counts SDPA itself, this fails and ours should go."""
    assert 'aten::scaled_dot_product_attention' not in _DEFAULT_SUPPORTED_FLOP_OPS
    model, inputs = small_illama(), (torch.zeros(1, 3, 64, 64), )
    with torch.no_grad():
        ours = flop_analyzer(model, inputs).unsupported_ops_warnings(False)
        plain = FlopAnalyzer(model, inputs).unsupported_ops_warnings(False)
        extra = ours.by_operator()
        assert ours.total() - plain.total() == sum(extra[op] for op in (
            'scaled_dot_product_attention', 'PythonOp.GatedProjection', 'PythonOp.RMSNormFunction'))


@pytest.mark.parametrize('name', CHEAP)
def test_metafile_flops_are_what_the_tool_computes(name, get_flops):
    model = metafile_models()[name]
    flops, _ = get_flops._count(model['Config'])
    assert model['Metadata']['FLOPs'] == flops


def test_every_main_model_has_integer_flops_and_no_twin_has(get_flops):
    main = {name for _, name, _ in get_flops.metafile_models()}
    for name, model in metafile_models().items():
        assert isinstance(model['Metadata'].get('FLOPs'), int) == (name in main), name
    assert 'illama-nano-p8_1xb32-30e_shapes-64px' not in main


def test_update_writes_flops_after_the_parameters_of_the_named_model(get_flops):
    text = ('Models:\n  - Name: a\n    Metadata:\n      Parameters: 10\n    Config: a.py\n'
            '  - Name: b\n    Metadata:\n      Epochs: 1\n      Parameters: 20\n      FLOPs: 5\n    Config: b.py\n')
    text = get_flops.write_flops(get_flops.write_flops(text, 'b', 7), 'a', 3)
    assert yaml.safe_load(text)['Models'][0]['Metadata'] == {'Parameters': 10, 'FLOPs': 3}
    assert yaml.safe_load(text)['Models'][1]['Metadata'] == {'Epochs': 1, 'Parameters': 20, 'FLOPs': 7}
    with pytest.raises(ValueError, match='c: no Metadata'):
        get_flops.write_flops(text, 'c', 1)


def test_the_command_line_prints_each_configs_flops_at_its_size_or_the_given_one(get_flops, capsys):
    twin = 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py'
    get_flops.main([twin, '--shape', '32'])
    get_flops.main([twin])
    first, second = capsys.readouterr().out.splitlines()
    assert first.endswith('at 32x32') and second.endswith('at 64x64')
    assert int(first.split(': ')[1].split()[0]) < int(second.split(': ')[1].split()[0])
