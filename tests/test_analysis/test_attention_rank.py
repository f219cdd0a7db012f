"""mmcausal/analysis/attention_rank.py and tools/analysis_tools/attention_rank.py (iLLaMA Fig. 4)."""
import csv
import math

import pytest
import torch

from analysis_utils import ILLAMA_TWIN, MAMBA_TWIN, build_backbone, load_tool
from mmcausal.analysis import AnalysisError
from mmcausal.analysis.attention_rank import (
    attention_ranks,
    check_layer_head,
    cumulative_singular_values,
    default_rtol,
    effective_rank,
    index_at,
    numerical_rank,
    singular_values,
)
from mmcausal.models.layers import record_attention
from report_utils import assert_report_matches


def test_identity_and_uniform_attention():
    n = 7
    identity, uniform = torch.eye(n), torch.full((n, n), 1. / n)
    assert int(numerical_rank(identity)) == n and int(numerical_rank(uniform)) == 1
    assert float(effective_rank(singular_values(identity))) == pytest.approx(n)
    assert float(effective_rank(singular_values(uniform))) == pytest.approx(1.)
    # a flat spectrum is the diagonal: c_k = k / n first reaches 0.8 at k = 6 (5/7 < 0.8 <= 6/7)
    torch.testing.assert_close(cumulative_singular_values(singular_values(identity)),
                               torch.arange(1, n + 1, dtype=torch.float64) / n)
    assert int(index_at(cumulative_singular_values(singular_values(identity)))) == 6
    assert int(index_at(cumulative_singular_values(singular_values(uniform)))) == 1


def test_effective_rank_and_tolerance_by_hand():
    values = singular_values(torch.diag(torch.tensor([3., 1., 0.])))
    p = [.75, .25]
    assert float(effective_rank(values)) == pytest.approx(math.exp(-sum(x * math.log(x) for x in p)))
    assert int(numerical_rank(torch.diag(torch.tensor([3., 1., 0.])))) == 2
    tiny = torch.diag(torch.tensor([1., 1e-9], dtype=torch.float64))
    assert default_rtol(tiny) == 2 * torch.finfo(torch.float32).eps
    assert int(numerical_rank(tiny)) == 1 and int(numerical_rank(tiny, rtol=1e-12)) == 2
    assert int(numerical_rank(tiny)) == int(torch.linalg.matrix_rank(tiny.float()))  # torch's fp32 default


def test_causal_attention_is_full_rank_and_bidirectional_is_not_at_init():
    images = torch.randn(3, 3, 16, 16)
    causal = attention_ranks(build_backbone('causal'), [images[:2], images[2:]])
    bidirectional = attention_ranks(build_backbone('bidirectional'), [images])
    assert [r.name for r in causal] == ['layers.0.attn.attn_probe', 'layers.1.attn.attn_probe']
    assert all(r.count == 3 and (r.rows, r.cols) == (17, 17) and r.heads == 2 for r in causal)
    # lower triangular with a positive diagonal: non-singular, whatever the weights
    assert all(torch.equal(r.numerical, torch.full((2, ), 17., dtype=torch.float64)) for r in causal)
    # near-uniform rows at the small init: the bidirectional matrix is close to rank 1, the causal one is not
    for c, b in zip(causal, bidirectional):
        assert (c.effective > 5 * b.effective).all() and (c.index > b.index).all()


def test_statistics_are_means_over_the_probed_matrices():
    model, images = build_backbone('causal'), torch.randn(2, 3, 16, 16)
    with record_attention(model) as records:
        model(images)
    weights = records['layers.1.attn.attn_probe'][0][:, 1].double()  # head 1 of both images
    p = [s / s.sum() for s in torch.linalg.svdvals(weights)]
    expected = sum(torch.exp(-(q * q.log()).sum()) for q in p) / 2
    rank = attention_ranks(model, [images])[1]
    assert float(rank.effective[1]) == pytest.approx(float(expected), rel=1e-9)
    torch.testing.assert_close(rank.curve[1], sum(q.cumsum(0) for q in p) / 2)


def test_models_without_attention_and_bad_layers_are_refused():
    with pytest.raises(AnalysisError, match='DefocusMamba has no attention weights.*DefocusMambaMixer'):
        attention_ranks(build_backbone('mamba'), [torch.randn(1, 3, 16, 16)])
    ranks = attention_ranks(build_backbone('causal'), [torch.randn(1, 3, 16, 16)])
    assert check_layer_head(ranks, -1, 1) is ranks[1]
    with pytest.raises(AnalysisError, match=r'Layer 2 is out of range: the model has 2 attention layers'):
        check_layer_head(ranks, 2, 0)
    with pytest.raises(AnalysisError, match=r'Head 2 is out of range: .* has 2 heads'):
        check_layer_head(ranks, 0, 2)


def test_cli_overlays_mask_modes(image_folder, tmp_path, capsys):
    load_tool('attention_rank').main([ILLAMA_TWIN, '--mask-modes', 'causal', 'bidirectional', '--images',
                                      str(image_folder), '--num-images', '2', '--out-dir', str(tmp_path)])
    assert (tmp_path / 'attention_rank_curve.png').stat().st_size > 1000
    assert (tmp_path / 'attention_rank_layers.png').stat().st_size > 1000
    with open(tmp_path / 'attention_rank.csv') as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 2 * 4 * 2  # modes x layers x heads
    causal = [row for row in rows if row['model'].endswith('(causal)')]
    assert len(causal) == 8 and all(float(row['numerical_rank']) == 65 and row['matrices'] == '2' for row in causal)
    assert '| illama-nano-p8_1xb32-30e_shapes-64px (bidirectional) | 3 | 65 x 65 |' in capsys.readouterr().out


@pytest.mark.parametrize('args,message', [
    ([MAMBA_TWIN], 'AnalysisError: DefocusMamba has no attention weights'),
    ([ILLAMA_TWIN, '--layer', '4'], 'AnalysisError: Layer 4 is out of range'),
    ([MAMBA_TWIN, '--mask-modes', 'bidirectional'], "DefocusMamba cannot honour mask_mode='bidirectional'"),
])
def test_cli_input_errors_end_in_one_line(args, message, image_folder, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        load_tool('attention_rank').main([*args, '--images', str(image_folder), '--num-images', '1',
                                          '--out-dir', str(tmp_path)])
    assert_report_matches(exit_info.value, message)


def test_cli_rejects_a_missing_checkpoint(capsys):
    with pytest.raises(SystemExit):
        load_tool('attention_rank').main([f'{ILLAMA_TWIN}:missing.pth'])
    assert 'checkpoint not found: missing.pth' in capsys.readouterr().err


def test_mask_modes_on_a_backbone_without_mask_mode_end_in_one_line(image_folder, tmp_path):
    """Every mmcausal backbone takes ``mask_mode``; a stock one (mmpretrain's ViT) does not."""
    config = tmp_path / 'stock_vit.py'
    config.write_text(f"_base_ = [{ILLAMA_TWIN!r}]\n"
                      "model = dict(backbone=dict(_delete_=True, type='VisionTransformer', arch='deit-tiny', "
                      "img_size=64, patch_size=8))\n")
    with pytest.raises(SystemExit) as exit_info:
        load_tool('attention_rank').main([str(config), '--mask-modes', 'causal', '--images', str(image_folder),
                                          '--num-images', '1', '--out-dir', str(tmp_path / 'out')])
    assert_report_matches(exit_info.value, 'AnalysisError: --mask-modes sets model.backbone.mask_mode, which')


def test_rank_figures_explain_their_bands_and_count_layers_from_1():
    from mmcausal.analysis.attention_rank import rank_curve_figure, rank_layers_figure
    results = {'causal': attention_ranks(build_backbone('causal'), [torch.randn(2, 3, 16, 16)])}
    layers = rank_layers_figure(results)
    for ax in layers.axes:
        assert list(ax.get_xticks()) == [1, 2] and ax.get_xlabel() == 'attention layer (from 1)'
    assert [text.get_text() for text in layers.axes[0].get_legend().get_texts()] == [
        'causal: mean', 'causal: min-max over heads']
    assert 'shaded band = range from the lowest to the highest head' in layers._suptitle.get_text()
    assert rank_curve_figure(results, -1, 0).axes[0].get_title().startswith('Attention spectrum, layer 2, head 1')
