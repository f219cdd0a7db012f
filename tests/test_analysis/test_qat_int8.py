"""tools/analysis_tools/qat_int8.py: a QAT classifier fake-quantized and in int8, on the W8A8 nano twin."""
import contextlib
import io
import re
from pathlib import Path

import pytest
import torch

from analysis_utils import ILLAMA_TWIN, ROOT, load_tool
from mmcausal.analysis.inputs import build_model
from mmcausal.models.illama import Int8Linear
from mmcausal.utils.config_reading import read_config
from report_utils import assert_report_matches

QAT_TWIN = str(ROOT / 'configs/illama/illama-nano-p8_qat-w8a8_1xb32-3e_shapes-64px.py')
ROW = re.compile(r'^\| (fake-quantized|int8) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$', re.M)


@pytest.fixture(scope='module')
def shapes_val(tmp_path_factory) -> Path:
    """The shapes ImageNet layout with 2 val images per class (8)."""
    from mmcausal.datasets.shapes import make_imagenet_like
    root = tmp_path_factory.mktemp('qat_shapes')
    make_imagenet_like(str(root), num_train_per_class=1, num_val_per_class=2)
    return root


@pytest.fixture(scope='module')
def qat_checkpoint(tmp_path_factory) -> Path:
    """The randomly initialised W8A8 twin after one forward (which sets its step sizes), saved as a checkpoint."""
    model = build_model(read_config(QAT_TWIN, {'load_from': None}))
    with torch.no_grad():
        model(torch.randn(4, 3, 64, 64, generator=torch.Generator().manual_seed(0)), mode='tensor')
    path = tmp_path_factory.mktemp('qat_checkpoint') / 'qat.pth'
    torch.save({'state_dict': model.state_dict()}, path)
    return path


def run_tool(*argv: str) -> str:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        load_tool('qat_int8').main(list(argv))
    return printed.getvalue()


def test_cli_compares_the_fake_quantized_and_int8_twin(shapes_val, qat_checkpoint):
    printed = run_tool(QAT_TWIN, str(qat_checkpoint), '--batches', '2', '--rounds', '2', '--cfg-options',
                       f'val_dataloader.dataset.data_root={shapes_val}', 'val_dataloader.batch_size=3')
    rows = {name: (int(n), float(top1), float(mib), float(ms)) for name, n, top1, mib, ms in ROW.findall(printed)}
    assert set(rows) == {'fake-quantized', 'int8'}
    assert rows['fake-quantized'][0] == rows['int8'][0] == 6  # 2 batches of 3
    assert rows['int8'][2] < rows['fake-quantized'][2] / 2  # int8 weights against fp32 weights and quantizer state
    assert all(ms > 0 for *_, ms in rows.values())
    agree, total = map(int, re.search(r'prediction agreement: [\d.]+ % \((\d+) / (\d+) images\)', printed).groups())
    assert total == 6 and 0 <= agree <= 6
    assert float(re.search(r'max \|logit diff\|: (\S+)', printed).group(1)) < 1e-3
    assert 'median of 2 interleaved rounds x 2 batches of 3 images, 1 thread(s)' in printed


def test_int8_state_dict_holds_int8_weights(qat_checkpoint):
    tool = load_tool('qat_int8')
    _, fake, int8 = tool.qat_models(QAT_TWIN, str(qat_checkpoint))
    layers = [module for module in int8.modules() if isinstance(module, Int8Linear)]
    assert len(layers) == 4 * 4 and all(layer.weight_t.dtype == torch.int8 for layer in layers)
    assert tool.size_mib(int8) < tool.size_mib(fake)


@pytest.mark.parametrize('kind,message', [
    ('full precision config', 'AnalysisError: .* has no model.backbone.qat'),
    ('untrained steps', 'AnalysisError: .* has no learned step sizes'),
])
def test_cli_input_errors_end_in_one_line(kind, message, qat_checkpoint, tmp_path):
    if kind == 'untrained steps':
        model = build_model(read_config(QAT_TWIN, {'load_from': None}))
        checkpoint, config = tmp_path / 'fresh.pth', QAT_TWIN
        torch.save({'state_dict': model.state_dict()}, checkpoint)
    else:
        checkpoint, config = qat_checkpoint, ILLAMA_TWIN
    with pytest.raises(SystemExit) as exit_info:
        load_tool('qat_int8').main([config, str(checkpoint)])
    assert_report_matches(exit_info.value, message)
