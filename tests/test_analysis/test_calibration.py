"""mmcausal/analysis/calibration.py and tools/analysis_tools/calibration.py (iLLaMA Table 8, App. G Fig. 7)."""
import contextlib
import csv
import io
import math
from pathlib import Path

import pytest
import torch

from analysis_utils import ILLAMA_TWIN, ROOT, load_tool
from mmcausal.analysis import AnalysisError
from mmcausal.analysis.calibration import (
    bin_indices,
    calibration,
    check_classifier,
    confidences_and_hits,
    expected_calibration_error,
    reliability_figure,
)
from report_utils import assert_report_matches


def oracle_ece(probabilities, labels, num_bins=15):
    """Guo et al. 2017, written from the definition: bins ((b - 1) / M, b / M], ECE = sum_b |B_b| / n *
    |acc(B_b) - conf(B_b)| with confidence = the largest probability and a hit = a correct top-1 prediction."""
    rows = [(max(p), int(max(range(len(p)), key=p.__getitem__) == y)) for p, y in zip(probabilities, labels)]
    total = 0.
    for b in range(1, num_bins + 1):
        members = [(c, h) for c, h in rows if (b - 1) / num_bins < c <= b / num_bins or (b == 1 and c == 0)]
        if members:
            accuracy = sum(h for _, h in members) / len(members)
            confidence = sum(c for c, _ in members) / len(members)
            total += len(members) / len(rows) * abs(accuracy - confidence)
    return total


def test_ece_of_a_hand_computed_example():
    # bin 14 (13/15, 14/15]: 0.9 hit, 0.92 miss -> |0.5 - 0.91| * 2/4; bin 9 (8/15, 9/15]: 0.55 hit -> 0.45 * 1/4;
    # bin 7 (6/15, 7/15]: 0.42 miss -> 0.42 * 1/4; ECE = 0.205 + 0.1125 + 0.105 = 0.4225
    probabilities = [[.9, .05, .05], [.92, .04, .04], [.55, .3, .15], [.42, .4, .18]]
    labels = [0, 1, 0, 2]
    assert oracle_ece(probabilities, labels) == pytest.approx(.4225)
    assert expected_calibration_error(torch.tensor(probabilities), torch.tensor(labels)) == pytest.approx(.4225)
    result = calibration(*confidences_and_hits(torch.tensor(probabilities), torch.tensor(labels)))
    assert result.n == 4 and result.top1 == .5 and result.mean_confidence == pytest.approx(.6975)
    assert [int(n) for n in result.counts] == [0] * 6 + [1, 0, 1, 0, 0, 0, 0, 2, 0]
    assert float(result.accuracy[13]) == .5 and float(result.confidence[13]) == pytest.approx(.91)


def test_bins_are_closed_on_the_right():
    edges = torch.tensor([0., .25, .26, .5, .75, 1.], dtype=torch.float64)
    assert bin_indices(edges, 4).tolist() == [0, 0, 1, 1, 2, 3]


@pytest.mark.parametrize('num_bins', [1, 10, 15])
def test_ece_equals_the_oracle_on_random_predictions(num_bins):
    generator = torch.Generator().manual_seed(num_bins)
    probabilities = (3 * torch.randn(200, 7, generator=generator, dtype=torch.float64)).softmax(-1)
    labels = torch.randint(0, 7, (200, ), generator=generator)
    assert expected_calibration_error(probabilities, labels, num_bins) == pytest.approx(
        oracle_ece(probabilities.tolist(), labels.tolist(), num_bins), abs=1e-12)


def test_perfectly_calibrated_predictions_give_zero():
    # exactly calibrated: in each bin a fraction c of the predictions with confidence c is right
    confidences = torch.tensor([.1, .3, .5, .7, .9], dtype=torch.float64).repeat_interleave(100)
    hits = torch.cat([(torch.arange(100) < round(100 * c)).double() for c in (.1, .3, .5, .7, .9)])
    assert calibration(confidences, hits).ece == pytest.approx(0, abs=1e-12)
    # sampled: 10 classes, the predicted one with probability c (uniform in [0.1, 1]), right with probability c
    generator = torch.Generator().manual_seed(0)
    n, k = 60000, 10
    c = .1 + .9 * torch.rand(n, generator=generator, dtype=torch.float64)
    probabilities = ((1 - c) / (k - 1))[:, None].repeat(1, k)
    probabilities[:, 0] = c
    wrong = 1 + torch.randint(0, k - 1, (n, ), generator=generator)
    labels = torch.where(torch.rand(n, generator=generator, dtype=torch.float64) < c, 0, wrong)
    assert expected_calibration_error(probabilities, labels) < .01
    # and a model that is always sure and right half of the time is off by one half
    assert calibration(torch.ones(10, dtype=torch.float64), torch.arange(10) % 2).ece == pytest.approx(.5)


def test_labels_outside_the_classes_and_empty_input_are_refused():
    with pytest.raises(AnalysisError, match="Labels 0..5 do not fit the classifier's 3 classes"):
        confidences_and_hits(torch.full((2, 3), 1 / 3), torch.tensor([0, 5]))
    with pytest.raises(AnalysisError, match='No images to calibrate on'):
        calibration(torch.zeros(0), torch.zeros(0))


def test_reliability_figure_draws_a_panel_and_a_histogram_per_model():
    confidences = torch.tensor([.95, .95, .55, .35], dtype=torch.float64)
    results = {'a': calibration(confidences, torch.tensor([1., 0., 1., 0.])),
               'b': calibration(confidences, torch.ones(4))}
    figure = reliability_figure(results)
    assert len(figure.axes) == 4
    assert figure.axes[0].get_title().startswith('a\nECE 0.4250')
    assert figure.axes[2].get_xlabel() == 'confidence (max softmax), 15 bins'  # row 2: the histograms


@pytest.fixture(scope='module')
def shapes_val(tmp_path_factory) -> Path:
    """The shapes ImageNet layout with 2 val images per class (8)."""
    from mmcausal.datasets.shapes import make_imagenet_like
    root = tmp_path_factory.mktemp('calibration_shapes')
    make_imagenet_like(str(root), num_train_per_class=1, num_val_per_class=2)
    return root


def read_csv(path: Path):
    with open(path) as file:
        return list(csv.DictReader(file))


@pytest.fixture(scope='module')
def val_run(shapes_val, tmp_path_factory):
    """The tool's output folder and printed table for the random-init iLLaMA twin on the config's val dataloader."""
    out = tmp_path_factory.mktemp('calibration_val')
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        load_tool('calibration').main([ILLAMA_TWIN, '--cfg-options', f'val_dataloader.dataset.data_root={shapes_val}',
                                       '--out-dir', str(out)])
    return out, printed.getvalue()


def test_cli_on_the_val_dataloader(val_run):
    out, printed = val_run
    assert (out / 'reliability.png').stat().st_size > 1000
    summary, = read_csv(out / 'calibration.csv')
    bins = read_csv(out / 'calibration_bins.csv')
    assert summary['images'] == '8' and summary['bins'] == '15' and len(bins) == 15
    assert sum(int(row['images']) for row in bins) == 8
    ece = sum(int(row['images']) / 8 * abs(float(row['gap'])) for row in bins if row['gap'])
    assert float(summary['ece']) == pytest.approx(ece, rel=1e-5)
    assert '| illama-nano-p8_1xb32-30e_shapes-64px | 8 |' in printed


def test_cli_on_class_folders_labels_them_in_sorted_order(val_run, shapes_val, tmp_path):
    """The val images as class subfolders (sorted names = labels) give the val dataloader's result."""
    load_tool('calibration').main([ILLAMA_TWIN, '--images', str(shapes_val / 'val'), '--out-dir', str(tmp_path)])
    assert read_csv(tmp_path / 'calibration.csv') == read_csv(val_run[0] / 'calibration.csv')


@pytest.mark.parametrize('config,extra,message', [
    ('no_val', [], 'AnalysisError: The config has no val_dataloader or test_dataloader'),
    ('headless', [], 'AnalysisError: The classifier has no head'),
    ('segmentor', [], 'AnalysisError: EncoderDecoder is not an image classifier'),
    (None, ['--images', 'FLAT'], 'AnalysisError: .* has no class subfolders; calibration needs labelled images'),
])
def test_cli_input_errors_end_in_one_line(config, extra, message, image_folder, tmp_path):
    configs = {
        'no_val': f"_base_ = [{ILLAMA_TWIN!r}]\nval_dataloader = None\ntest_dataloader = None\n",
        'headless': f"_base_ = [{ILLAMA_TWIN!r}]\nmodel = dict(head=None)\n",
    }
    if config == 'segmentor':
        path = str(ROOT / 'configs/illama/upernet_illama-nano-p8_1xb8-300i_shapes-64x64.py')
    elif config is None:
        path = ILLAMA_TWIN
    else:
        (tmp_path / f'{config}.py').write_text(configs[config])
        path = str(tmp_path / f'{config}.py')
    extra = [str(image_folder) if arg == 'FLAT' else arg for arg in extra]
    with pytest.raises(SystemExit) as exit_info:
        load_tool('calibration').main([path, *extra, '--out-dir', str(tmp_path / 'out')])
    assert_report_matches(exit_info.value, message)


def test_cli_rejects_a_missing_folder(capsys):
    with pytest.raises(SystemExit):
        load_tool('calibration').main([ILLAMA_TWIN, '--images', 'no/such/folder'])
    assert 'image folder not found: no/such/folder' in capsys.readouterr().err


def test_check_classifier_accepts_the_twin():
    from mmcausal.analysis.inputs import build_model
    from mmcausal.utils.config_reading import read_config
    model = build_model(read_config(ILLAMA_TWIN))
    assert check_classifier(model) is model
    assert math.isclose(float(model(torch.zeros(1, 3, 64, 64), mode='tensor').softmax(-1).sum()), 1, rel_tol=1e-6)
