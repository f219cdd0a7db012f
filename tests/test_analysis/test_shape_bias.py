"""mmcausal/analysis/shape_bias.py and tools/analysis_tools/shape_bias.py (Geirhos et al. 2019; iLLaMA Table 8,
App. H Fig. 8)."""
import contextlib
import csv
import io
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from analysis_utils import ILLAMA_TWIN, load_tool
from mmcausal.analysis import AnalysisError
from mmcausal.analysis.shape_bias import (
    IMAGENET16,
    Stimulus,
    categories_for,
    category_probabilities,
    class_categories,
    decide,
    parse_stimulus_name,
    read_stimuli,
    shape_bias,
    shape_bias_figure,
)
from mmcausal.utils.config_reading import read_config
from report_utils import assert_report_matches


def oracle_shape_bias(probabilities, categories, stimuli):
    """model-vs-human's protocol written from its description: decision = the category of the highest mean
    probability over its classes; over images with shape != texture, shape / (shape + texture) decisions, pooled
    and per shape category."""
    decisions = []
    for row in probabilities:
        means = {name: sum(row[i] for i in indices) / len(indices) for name, indices in categories.items()}
        decisions.append(max(means, key=means.get))  # the first of equal means, as argmax
    counts = {}
    for (shape, texture), decision in zip(stimuli, decisions):
        if shape == texture:
            continue
        for key in ('all', shape):
            entry = counts.setdefault(key, [0, 0])
            entry[0] += decision == shape
            entry[1] += decision == texture
    return decisions, {key: s / (s + t) if s + t else math.nan for key, (s, t) in counts.items()}


def test_imagenet16_is_the_published_mapping():
    """The table agrees with the copy of model-vs-human's mapping that mmpretrain ships (its ShapeBiasMetric)."""
    from mmpretrain.evaluation.metrics.shape_bias_label import ShapeBiasMetric
    assert list(IMAGENET16) == sorted(IMAGENET16) and len(IMAGENET16) == 16
    for name, indices in IMAGENET16.items():
        assert list(indices) == getattr(ShapeBiasMetric, f'{name}_indices'), name
    assert {name: len(indices) for name, indices in IMAGENET16.items() if len(indices) > 8} == {'bird': 49, 'dog': 109}
    every = [i for indices in IMAGENET16.values() for i in indices]
    assert len(every) == len(set(every)) and max(every) < 1000  # no class in two categories


def test_decision_is_the_highest_mean_not_the_highest_sum():
    categories = {'many': (0, 1, 2), 'one': (3, )}
    probabilities = torch.tensor([[.2, .2, .2, .4], [.5, .3, .1, .1]], dtype=torch.float64)
    torch.testing.assert_close(category_probabilities(probabilities, categories),
                               torch.tensor([[.2, .4], [.3, .1]], dtype=torch.float64))
    assert decide(probabilities, categories) == ['one', 'many']  # the sum would say 'many' (0.6) for the first


def test_shape_bias_by_hand():
    stimuli = [Stimulus('cat/cat1-dog1.png', 'cat', 'dog'), Stimulus('cat/cat2-dog2.png', 'cat', 'dog'),
               Stimulus('cat/cat3-car1.png', 'cat', 'car'), Stimulus('dog/dog1-dog2.png', 'dog', 'dog'),
               Stimulus('dog/dog2-cat1.png', 'dog', 'cat')]
    result = shape_bias(stimuli, ['cat', 'dog', 'bird', 'cat', 'dog'], ['car', 'cat', 'dog'])
    # cat: shape, texture, other; dog: one without conflict (left out), one shape
    assert (result.overall.images, result.overall.shape, result.overall.texture, result.overall.other) == (4, 2, 1, 1)
    assert result.overall.bias == pytest.approx(2 / 3) and result.excluded == 1
    assert list(result.per_category) == ['cat', 'dog']  # the mapping's order, categories with images only
    assert result.per_category['cat'].bias == .5 and result.per_category['dog'].bias == 1.
    assert result.category_mean == pytest.approx(.75)
    assert math.isnan(shape_bias(stimuli[2:3], ['bird'], ['cat']).overall.bias)  # no shape or texture decision
    with pytest.raises(AnalysisError, match='No cue-conflict image has a texture category other than its shape'):
        shape_bias(stimuli[3:4], ['dog'], ['dog'])


@pytest.mark.parametrize('seed', [0, 1])
def test_imagenet16_decisions_and_ratios_equal_the_oracle(seed):
    generator = torch.Generator().manual_seed(seed)
    names = list(IMAGENET16)
    pairs = [(names[i], names[j]) for i, j in torch.randint(0, 16, (300, 2), generator=generator).tolist()]
    # sharp random probabilities, with the shape's or the texture's classes often lifted
    logits = 4 * torch.randn(300, 1000, generator=generator, dtype=torch.float64)
    for row, (shape, texture) in enumerate(pairs):
        lifted = {0: shape, 1: texture}.get(row % 3)
        if lifted is not None:
            logits[row, list(IMAGENET16[lifted])] += 6
    probabilities = logits.softmax(-1)
    stimuli = [Stimulus(f'{s}/{s}{i}-{t}{i}.png', s, t) for i, (s, t) in enumerate(pairs)]
    decisions, expected = oracle_shape_bias(probabilities.tolist(), IMAGENET16, pairs)
    assert decide(probabilities, IMAGENET16) == decisions
    result = shape_bias(stimuli, decisions, IMAGENET16)
    assert result.overall.bias == pytest.approx(expected['all'])
    for name, counts in result.per_category.items():
        assert counts.bias == pytest.approx(expected[name], nan_ok=True)


def test_stimulus_names_and_folder_layout(tmp_path):
    assert parse_stimulus_name('cat7-elephant1.png') == ('cat', 'elephant')
    assert parse_stimulus_name('knife10-bottle3.PNG') == ('knife', 'bottle')
    for name in ('cat7.png', 'cat-elephant.png', 'cat7-elephant1.txt', '7cat-elephant1.png'):
        with pytest.raises(AnalysisError, match='is not named <shape><n>-<texture><m>.png'):
            parse_stimulus_name(name)
    for path in ('cat/cat1-dog2.png', 'cat/cat1-cat3.png', 'dog/dog10-cat1.png', 'dog/notes.txt'):
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_bytes(b'')
    assert read_stimuli(str(tmp_path)) == [Stimulus('cat/cat1-cat3.png', 'cat', 'cat'),
                                           Stimulus('cat/cat1-dog2.png', 'cat', 'dog'),
                                           Stimulus('dog/dog10-cat1.png', 'dog', 'cat')]
    (tmp_path / 'dog/cat2-dog1.png').write_bytes(b'')
    with pytest.raises(AnalysisError, match=r"dog/cat2-dog1.png: its shape 'cat' is not its folder 'dog'"):
        read_stimuli(str(tmp_path))
    (tmp_path / 'dog/cat2-dog1.png').unlink()
    (tmp_path / 'dog/deeper').mkdir()
    (tmp_path / 'dog/deeper/dog3-cat1.png').write_bytes(b'')
    with pytest.raises(AnalysisError, match='is not in the layout <shape category>/'):
        read_stimuli(str(tmp_path))
    with pytest.raises(AnalysisError, match='Cue-conflict folder not found'):
        read_stimuli(str(tmp_path / 'missing'))
    (tmp_path / 'empty').mkdir()
    with pytest.raises(AnalysisError, match='holds no cue-conflict images'):
        read_stimuli(str(tmp_path / 'empty'))


def test_category_mappings():
    twin = read_config(ILLAMA_TWIN)
    assert categories_for('auto', twin, 4) == class_categories(('circle', 'cross', 'square', 'triangle'))
    assert categories_for('auto', twin, 1000) == IMAGENET16 == categories_for('imagenet16', twin, None)
    with pytest.raises(AnalysisError, match='The categories name class 914, but the classifier has 4 classes'):
        categories_for('imagenet16', twin, 4)
    with pytest.raises(AnalysisError, match='The config names 4 classes but the classifier has 3'):
        categories_for('classes', twin, 3)
    with pytest.raises(AnalysisError, match='repeat a name'):
        class_categories(['a', 'a'])


def test_figure_rows_are_the_categories_with_shape_fraction_from_1_to_0():
    stimuli = [Stimulus('a/a1-b1.png', 'a', 'b'), Stimulus('b/b1-a1.png', 'b', 'a')]
    results = {'m1': shape_bias(stimuli, ['a', 'a'], 'ab'), 'm2': shape_bias(stimuli, ['b', 'b'], 'ab')}
    ax = shape_bias_figure(results).axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ['a', 'b'] and ax.get_xlim()[0] > ax.get_xlim()[1]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ['m1: 0.500', 'm2: 0.500']
    np.testing.assert_allclose(ax.collections[0].get_offsets(), [[1., 1.], [0., 0.]])  # a on top: shape; b: texture


@pytest.fixture(scope='module')
def shapes_cue_conflict(tmp_path_factory) -> Path:
    from mmcausal.datasets.shapes.cue_conflict import make_cue_conflict_like
    root = tmp_path_factory.mktemp('cue_conflict')
    make_cue_conflict_like(str(root), num_per_pair=1)
    return root


def read_csv(path: Path):
    with open(path) as file:
        return list(csv.DictReader(file))


def test_cli_on_the_shapes_cue_conflict_set(shapes_cue_conflict, tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        load_tool('shape_bias').main([ILLAMA_TWIN, '--images', str(shapes_cue_conflict), '--out-dir', str(tmp_path)])
    assert (tmp_path / 'shape_bias.png').stat().st_size > 1000
    summary = read_csv(tmp_path / 'shape_bias.csv')
    assert [row['category'] for row in summary] == ['circle', 'cross', 'square', 'triangle', 'all (pooled)',
                                                    'mean over categories']
    assert all(row['images'] == '3' for row in summary[:4]) and summary[4]['images'] == '12'
    decisions = read_csv(tmp_path / 'shape_bias_decisions.csv')
    assert len(decisions) == 16 and sum(row['kind'] == 'no conflict' for row in decisions) == 4
    kinds = [row['kind'] for row in decisions]
    pooled = summary[4]
    assert (int(pooled['shape_decisions']), int(pooled['texture_decisions'])) == (kinds.count('shape'),
                                                                                   kinds.count('texture'))
    assert '| illama-nano-p8_1xb32-30e_shapes-64px |' in printed.getvalue()


@pytest.mark.parametrize('args,message', [
    (['--categories', 'classes', 'IMAGENET'],
     r"AnalysisError: The cue-conflict images name categories \['cat', 'dog'\] that are not among"),
    (['--categories', 'imagenet16', 'IMAGENET'], 'AnalysisError: The categories name class 914, but the classifier '
     'has 4 classes'),
    (['HEADLESS'], 'AnalysisError: The classifier has no head'),
])
def test_cli_input_errors_end_in_one_line(args, message, shapes_cue_conflict, tmp_path):
    images, config = str(shapes_cue_conflict), ILLAMA_TWIN
    if 'IMAGENET' in args:
        (tmp_path / 'cue-conflict/cat').mkdir(parents=True)
        (tmp_path / 'cue-conflict/cat/cat1-dog1.png').write_bytes(b'')  # refused before any image is read
        images, args = str(tmp_path / 'cue-conflict'), args[:-1]
    if 'HEADLESS' in args:
        (tmp_path / 'headless.py').write_text(f"_base_ = [{ILLAMA_TWIN!r}]\nmodel = dict(head=None)\n")
        config, args = str(tmp_path / 'headless.py'), args[1:]
    with pytest.raises(SystemExit) as exit_info:
        load_tool('shape_bias').main([config, '--images', images, *args, '--out-dir', str(tmp_path / 'out')])
    assert_report_matches(exit_info.value, message)


@pytest.mark.parametrize('args,message', [
    ([], '--images DIR is required'),
    (['--images', 'no/such/folder'], 'image folder not found: no/such/folder'),
])
def test_cli_argument_errors(args, message, capsys):
    with pytest.raises(SystemExit):
        load_tool('shape_bias').main([ILLAMA_TWIN, *args])
    assert message in capsys.readouterr().err


def test_a_misnamed_image_ends_in_one_line(tmp_path):
    (tmp_path / 'cat').mkdir()
    (tmp_path / 'cat/cat.png').write_bytes(b'')
    with pytest.raises(SystemExit) as exit_info:
        load_tool('shape_bias').main([ILLAMA_TWIN, '--images', str(tmp_path), '--out-dir', str(tmp_path / 'out')])
    assert_report_matches(exit_info.value, r'AnalysisError: cat.png is not named <shape><n>-<texture><m>.png')
