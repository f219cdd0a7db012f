"""mmcausal/analysis/attention_maps.py and tools/analysis_tools/attention_maps.py (De-focus Fig. 1)."""
import csv

import pytest
import torch

from analysis_utils import DEFOCUS_VIT_TWIN, ILLAMA_TWIN, MAMBA_TWIN, build_backbone, load_tool
from mmcausal.analysis import AnalysisError, attention_map, cell_means, gradient_map
from mmcausal.models.defocus import sectioned_order
from mmcausal.models.layers import record_attention
from report_utils import assert_report_matches

OUT = 5  # a patch in the middle of the 4 x 4 grid: row 1, column 1


def _cells(kind: str, output, **options) -> torch.Tensor:
    """Gradient cell means (B, 16) of two 16 px images at the last layer."""
    gradient = gradient_map(build_backbone(kind, **options), torch.randn(2, 3, 16, 16), -1, output)
    assert gradient.pixels.shape == (2, 16, 16) and gradient.grid == (4, 4)
    return cell_means(gradient.pixels, gradient.grid).flatten(1)


@pytest.mark.parametrize('kind', ['causal', 'mamba'])
def test_causal_gradient_map_is_zero_after_the_output_token(kind):
    cells = _cells(kind, OUT)
    assert torch.equal(cells[:, OUT + 1:], torch.zeros_like(cells[:, OUT + 1:]))  # exactly: no path back
    assert (cells[:, :OUT + 1] > 0).all()
    assert (_cells(kind, 'cls') > 0).all()  # the class token comes last and sees every patch


def test_bidirectional_gradient_map_reaches_every_token():
    assert (_cells('bidirectional', OUT) > 0).all()


def test_attention_map_is_the_probed_row_and_sums_to_one():
    model, image = build_backbone('bidirectional'), torch.randn(1, 3, 16, 16)
    with record_attention(model) as records:
        model(image)
    probed = records['layers.1.attn.attn_probe'][0][0]  # (heads, 17, 17), class token last
    for query, slot in (('cls', 16), (OUT, OUT)):
        found = attention_map(model, image, 1, query)
        torch.testing.assert_close(found.heads, probed[:, slot, :16].view(2, 4, 4))
        torch.testing.assert_close(found.cls, probed[:, slot, 16])
        torch.testing.assert_close(found.heads.sum((1, 2)) + found.cls, torch.ones(2))
    assert found.query_cell == (1, 1)
    matrix = probed.mean(0)[:16, :16].clone().fill_diagonal_(0)
    torch.testing.assert_close(found.matrix, matrix / matrix.max())


def test_causal_attention_map_has_no_weight_on_later_tokens():
    found = attention_map(build_backbone('causal'), torch.randn(1, 3, 16, 16), -1, OUT)
    weights = found.heads.flatten(1)
    assert torch.equal(weights[:, OUT + 1:], torch.zeros(2, 16 - OUT - 1)) and (weights[:, :OUT + 1] > 0).all()
    assert torch.equal(found.cls, torch.zeros(2))
    assert torch.equal(found.matrix.triu(), torch.zeros(16, 16))  # strictly lower triangular (diagonal set to 0)


def test_sectioned_token_order_is_mapped_back_to_the_image():
    """De-focus's patch rearrangement (8 px sections of 2 x 2 patches on a 16 px image): a token's map covers
    exactly the cells that come before it in the sectioned sequence."""
    model = build_backbone('defocus_vit', img_size=8, patch_rearrange=True, out_type='cls_token')
    slot_of_cell = sectioned_order((4, 4), (2, 2)).argsort()
    token = 6  # row 1, column 2: the fourth token of the second section
    before = slot_of_cell <= slot_of_cell[token]
    found = attention_map(model, torch.randn(1, 3, 16, 16), 0, token)
    assert torch.equal(found.heads.flatten(1) > 0, before.expand(2, -1))
    gradient = gradient_map(model, torch.randn(1, 3, 16, 16), 0, token)
    assert torch.equal(cell_means(gradient.pixels, gradient.grid).flatten() > 0, before)


@pytest.mark.parametrize('kind,options,layer,token,message', [
    ('mamba', {}, -1, 'cls', 'DefocusMamba has no attention weights.*--maps gradient'),
    ('causal', {}, 2, 'cls', r'Layer 2 is out of range: ILLaMA has 2 blocks \(0..1'),
    ('causal', {}, 0, 16, r'Token 16 is out of range: the layer has 16 patch tokens \(4x4 grid'),
    ('vision_llama', {}, 0, 'cls', 'no class token; name a patch index'),
    ('vision_llama', dict(window_size=2), 0, 3, 'Layer 0 attends inside windows'),
])
def test_bad_requests_are_refused(kind, options, layer, token, message):
    with pytest.raises(AnalysisError, match=message):
        attention_map(build_backbone(kind, **options), torch.randn(1, 3, 16, 16), layer, token)


def test_cli_draws_the_focus_contrast(image_folder, tmp_path):
    load_tool('attention_maps').main([ILLAMA_TWIN, DEFOCUS_VIT_TWIN, '--labels', 'iLLaMA', 'De-focus ViT', '--layer',
                                      '-2', '--query', '27', '--output', '27', '--images', str(image_folder),
                                      '--image-index', '2', '--out-dir', str(tmp_path)])
    assert (tmp_path / 'attention_maps.png').stat().st_size > 1000
    with open(tmp_path / 'attention_maps.csv') as file:
        rows = list(csv.DictReader(file))
    gradients = {}
    for label in ('iLLaMA', 'De-focus ViT'):
        mine = [row for row in rows if row['model'] == label]
        assert {row['layer'] for row in mine} == {'2'}  # -2 of 4 blocks
        assert len(mine) == (2 + 1) * 64 + 64  # 2 heads and their mean, the gradient, on the 8 x 8 grid
        gradients[label] = [float(row['value']) for row in mine if row['map'] == 'gradient']
    assert all(value == 0 for value in gradients['De-focus ViT'][28:]) and all(gradients['De-focus ViT'][:28])
    # the iLLaMA twin's 'official' mask gates row t by its softmax mass on keys s <= t, which depends on later keys
    assert all(gradients['iLLaMA'])


def test_cli_refuses_attention_maps_of_mamba_but_draws_its_gradient(image_folder, tmp_path):
    args = [MAMBA_TWIN, '--images', str(image_folder), '--out-dir', str(tmp_path)]
    with pytest.raises(SystemExit) as exit_info:
        load_tool('attention_maps').main(args)
    assert_report_matches(exit_info.value, 'AnalysisError: DefocusMamba has no attention weights')
    load_tool('attention_maps').main([*args, '--maps', 'gradient', '--output', '5'])
    with open(tmp_path / 'attention_maps.csv') as file:
        assert len(list(csv.DictReader(file))) == 16  # the 4 x 4 grid of its 16 px patches


def test_maps_figure_is_readable_alone():
    """Layers and heads counted from 1 (as the README), a colour bar beside every heat map and the matrix, ticks,
    axis names on the matrix, and a title that says what is drawn."""
    from mmcausal.analysis.attention_maps import MapRow, maps_figure
    model, image = build_backbone('bidirectional'), torch.randn(1, 3, 16, 16)
    row = MapRow('twin', image[0].permute(1, 2, 0).numpy().clip(0, 1), 1, 2,
                 attention_map(model, image, 1, OUT), gradient_map(model, image, 1, 'cls'))
    figure = maps_figure([row], OUT, 'cls')
    panels = figure.axes[:6]  # image, mean, 2 heads, matrix, gradient; colour bars come after them
    assert 'layer 2 of 2' in panels[0].get_title()
    assert [ax.get_title() for ax in panels[2:4]] == ['query 5: head 1', 'query 5: head 2']
    assert len(figure.axes) == 6 + 5  # one colour bar per heat map (mean, two heads, matrix, gradient)
    assert all(len(ax.get_xticks()) and len(ax.get_yticks()) for ax in panels)
    assert (panels[4].get_xlabel(), panels[4].get_ylabel()) == ('key token', 'query token')
    title = figure._suptitle.get_text()
    assert 'patch token 5 attends' in title and 'class token depends' in title and 'counted from 1' in title
