"""The code path of one training step: the tracer counts what runs (functions, autograd backward included), and a
tiny model of every family runs mmcausal code in at most six files, one package of its own plus ``layers``."""
import re
import runpy
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from mmcausal.analysis.code_path import config_code_path, trace_code_path
from mmcausal.models.layers import RMSNorm

ROOT = Path(__file__).resolve().parents[2]
TWINS = {
    'illama': 'configs/illama/illama-nano-p8_1xb32-30e_shapes-64px.py',
    'vision_llama': 'configs/vision_llama/vision-llama-nano-p8_1xb32-20e_shapes-64px.py',
    'pyramid_vision_llama': 'configs/pyramid_vision_llama/pyramid-vision-llama-nano_1xb32-60e_shapes-64px.py',
    'defocus_mamba': 'configs/defocus/defocus-mamba-nano-p16_1xb32-30e_shapes-64px.py',
    'defocus_vit': 'configs/defocus/defocus-vit-nano-p8_1xb32-45e_shapes-64px.py',
    'defocus_retnet': 'configs/defocus/defocus-retnet-nano-p8_1xb32-30e_shapes-64px.py',
    'cait': 'configs/cait/cait-nano-p16_1xb64-150e_shapes-64px.py',
    'dit_llama': 'configs/dit_llama/dit-llama-nano-p2_1xb32-2ki_shapes-32px.py',
}
PACKAGE = {'illama': 'illama', 'vision_llama': 'vision_llama', 'pyramid_vision_llama': 'vision_llama',
           'defocus_mamba': 'defocus', 'defocus_vit': 'defocus', 'defocus_retnet': 'defocus', 'cait': 'cait',
           'dit_llama': 'generation'}


def test_the_tracer_records_forward_and_custom_backward_functions():
    norm = RMSNorm(8)
    x = torch.randn(3, 8, requires_grad=True)
    path = trace_code_path(lambda: norm(x).sum().backward())
    assert set(path.lines) == {'mmcausal/models/layers/block.py', 'mmcausal/models/layers/fast_paths.py'}
    assert path.functions['mmcausal/models/layers/fast_paths.py'] >= {'RMSNormFunction.forward',
                                                                       'RMSNormFunction.backward'}
    assert path.num_files == 2 and path.num_lines == sum(map(len, path.lines.values()))


@pytest.mark.parametrize('family', sorted(TWINS))
def test_a_tiny_model_runs_its_own_package_and_shared_layers_in_six_files_at_most(family):
    path = config_code_path(Config.fromfile(str(ROOT / TWINS[family])))
    packages = {name.split('/')[2] for name in path.lines}
    assert packages <= {PACKAGE[family], 'layers'} and PACKAGE[family] in packages, sorted(path.lines)
    assert path.num_files <= 6, sorted(path.lines)


def test_the_tool_prints_files_and_functions(capsys, monkeypatch):
    monkeypatch.setattr(sys, 'argv', ['code_path.py', str(ROOT / TWINS['defocus_retnet']), '--functions'])
    runpy.run_path(str(ROOT / 'tools/analysis_tools/code_path.py'), run_name='__main__')
    lines = capsys.readouterr().out.splitlines()
    header = re.fullmatch(r'.*: (\d+) files, (\d+) functions, (\d+) lines', lines[0])
    files, functions, executed = map(int, header.groups())
    assert files == len(lines) - 1 and 0 < files <= functions
    assert executed == sum(int(re.search(r': (\d+) lines', line).group(1)) for line in lines[1:])
    assert any(line.strip().startswith('mmcausal/models/defocus/retention.py') and 'MultiScaleRetention.forward'
               in line for line in lines[1:])
