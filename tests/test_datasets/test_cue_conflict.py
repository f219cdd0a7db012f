"""The shapes cue-conflict set (mmcausal/datasets/shapes/cue_conflict.py) and its option of
tools/dataset_converters/make_shapes_datasets.py."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy import ndimage

from mmcausal.analysis.shape_bias import read_stimuli
from mmcausal.datasets.shapes import SHAPE_CLASSES
from mmcausal.datasets.shapes.cue_conflict import (
    LATTICE_PITCH,
    lattice_mask,
    make_cue_conflict_like,
    render_cue_conflict,
    stimulus_rng,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('style', ['v1', 'v2', 'v3'])
def test_writes_a_valid_set_in_the_published_layout(tmp_path, style):
    summary = make_cue_conflict_like(str(tmp_path), num_per_pair=1, image_size=32, style=style)
    assert summary['num_images'] == 16 and summary['num_conflicting'] == 12
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*SHAPE_CLASSES, 'shapes_meta.json'])
    stimuli = read_stimuli(str(tmp_path))  # the analysis reads it: every name parses, every folder is the shape
    assert len(stimuli) == 16 and sum(s.conflicting for s in stimuli) == 12
    assert {(s.shape, s.texture) for s in stimuli} == {(a, b) for a in SHAPE_CLASSES for b in SHAPE_CLASSES}
    assert 'circle/circle1-triangle1.png' in {s.path for s in stimuli}
    with Image.open(tmp_path / 'circle/circle1-triangle1.png') as image:
        assert (image.format, image.mode, image.size) == ('PNG', 'RGB', (32, 32))


def test_same_seed_same_bytes_and_a_second_call_reuses_the_files(tmp_path):
    first = make_cue_conflict_like(str(tmp_path / 'a'), num_per_pair=1, image_size=32)
    make_cue_conflict_like(str(tmp_path / 'b'), num_per_pair=1, image_size=32)
    name = 'square/square1-cross1.png'
    assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes()
    stamp = (tmp_path / 'a' / name).stat().st_mtime_ns
    assert make_cue_conflict_like(str(tmp_path / 'a'), num_per_pair=1, image_size=32) == first
    assert (tmp_path / 'a' / name).stat().st_mtime_ns == stamp
    meta = json.loads((tmp_path / 'a/shapes_meta.json').read_text())
    assert meta['complete'] and meta['params']['dataset'] == 'cue-conflict'
    other = make_cue_conflict_like(str(tmp_path / 'a'), num_per_pair=1, image_size=32, seed=1)
    assert other['num_images'] == 16 and (tmp_path / 'a' / name).read_bytes() != (tmp_path / 'b' / name).read_bytes()


def test_refuses_bad_parameters_and_foreign_data(tmp_path):
    with pytest.raises(ValueError, match='num_per_pair must be at least 1'):
        make_cue_conflict_like(str(tmp_path / 'x'), num_per_pair=0)
    with pytest.raises(ValueError, match='style must be one of'):
        make_cue_conflict_like(str(tmp_path / 'x'), style='v9')
    (tmp_path / 'real/circle').mkdir(parents=True)
    with pytest.raises(FileExistsError, match='refusing to overwrite'):
        make_cue_conflict_like(str(tmp_path / 'real'), num_per_pair=1)


@pytest.mark.parametrize('texture', range(len(SHAPE_CLASSES)))
def test_lattice_elements_are_apart_and_of_the_element_size(texture):
    """Unrotated, on a large region: every inner element is one component of the element's area (its polygon
    rasterised), and no two elements touch."""
    size, element = 96, 10.
    mask = lattice_mask(np.random.default_rng(texture), np.ones((size, size), bool), texture, element, 0.)
    labels, count = ndimage.label(mask, structure=np.ones((3, 3)))
    inner = [i for i, box in enumerate(ndimage.find_objects(labels), 1)
             if box[0].start > 0 and box[1].start > 0 and box[0].stop < size and box[1].stop < size]
    assert len(inner) >= (size // (LATTICE_PITCH * element) - 1)**2
    areas = ndimage.sum(mask, labels, inner)
    assert np.all(np.abs(areas - element**2) < .15 * element**2), areas


def test_lattice_is_clipped_to_the_silhouette_and_every_pair_has_its_own_image():
    region = np.zeros((64, 64), bool)
    region[16:48, 16:48] = True
    mask = lattice_mask(np.random.default_rng(0), region, 2, 5., np.pi / 9)
    assert mask.any() and not (mask & ~region).any()
    images = {(s, t): np.asarray(render_cue_conflict(stimulus_rng(0, 'v2', s, t, 0), 64, s, t, 'v2'))
              for s in range(4) for t in range(4)}
    assert len({image.tobytes() for image in images.values()}) == 16


def test_make_shapes_datasets_draws_the_set_on_request(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location('make_shapes_tool',
                                                  ROOT / 'tools/dataset_converters/make_shapes_datasets.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert 'cue-conflict' not in tool.parse_args([]).which  # drawn only on request
    assert tool.parse_args(['--which', 'cue-conflict']).cue_conflict_per_pair == 10  # 160 images
    tool.main(['--out', str(tmp_path), '--which', 'cue-conflict', '--style', 'v2', '--cue-conflict-per-pair', '2'])
    assert f'cue-conflict: {tmp_path / "cue-conflict"} | images: 32 | classes: circle, cross, square, triangle' in \
        capsys.readouterr().out
    assert len(read_stimuli(str(tmp_path / 'cue-conflict'))) == 32
    with pytest.raises(SystemExit):
        tool.parse_args(['--cue-conflict-per-pair', '0'])
    assert '--cue-conflict-per-pair must be at least 1, got 0' in capsys.readouterr().err
