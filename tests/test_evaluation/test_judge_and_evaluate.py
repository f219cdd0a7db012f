"""The twins' judge trained through tools/train.py, the torch-fidelity extractors (the judge, ADM's Inception), and
tools/generation/evaluate.py end to end on small ADM-layout files (real shapes images, pure noise), including FID
against a reference file's stored statistics and its one-line answers to bad input."""
import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from e2e_utils import ROOT, run_command
from judge_utils import JUDGE_CONFIG, random_judge_checkpoint
from mmcausal.evaluation import (
    JudgeCNN,
    conditional_accuracy,
    frechet_distance_of,
    images_from_class_folders,
    save_sample_npz,
)
from mmcausal.evaluation.extractors import ExtractorError, build_extractor, extract_features

pytestmark = pytest.mark.e2e

EVALUATE = str(ROOT / 'tools/generation/evaluate.py')


def _tool_main(path: str):
    return runpy.run_path(path, run_name='tool')['main']


def _noise(num: int, size: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (num, size, size, 3), dtype=np.uint8)


@pytest.fixture(scope='module')
def judge_run(generation_judge, tmp_path_factory):
    """The judge trained by tools/train.py on the real train split, and the 32 px train / val / noise files."""
    files = dict(generation_judge, noise=tmp_path_factory.mktemp('noise') / 'noise.npz')
    save_sample_npz(str(files['noise']), _noise(400), np.arange(400) % 4)
    return files


def _load(path: Path):
    with np.load(path) as data:
        return data['arr_0'], data['arr_1']


# ---- JudgeCNN -----------------------------------------------------------------------------------------------------

def test_judge_cnn_has_the_spec_size_and_keeps_the_last_map():
    judge = JudgeCNN()
    convs = sum(c_in * c_out * 9 + c_out for c_in, c_out in ((3, 32), (32, 64), (64, 128)))
    assert sum(p.numel() for p in judge.parameters()) == convs + 2 * (32 + 64 + 128)  # ~100k with the head
    (features, ) = judge(torch.zeros(2, 3, 32, 32))
    assert features.shape == (2, 128, 8, 8)


def test_judge_cnn_refuses_groups_that_do_not_divide_a_stage():
    with pytest.raises(ValueError, match='num_groups'):
        JudgeCNN(channels=(32, 60), num_groups=8)


# ---- the judge, trained ------------------------------------------------------------------------------------------

def test_make_reference_npz_writes_the_folder_classes_as_labels(judge_run):
    images, labels = _load(judge_run['val'])
    assert images.shape == (100, 32, 32, 3) and images.dtype == np.uint8
    np.testing.assert_array_equal(np.bincount(labels), [25] * 4)
    assert labels.tolist() == sorted(labels.tolist())  # class folders in sorted order


def test_judge_classifies_held_out_real_images_and_not_noise(judge_run):
    judge = build_extractor(f'judge:{judge_run["checkpoint"]}')
    val, val_labels = _load(judge_run['val'])
    noise, noise_labels = _load(judge_run['noise'])
    val_features, noise_features = extract_features(judge, val), extract_features(judge, noise)
    assert conditional_accuracy(val_features.logits, val_labels) >= 0.95
    assert abs(conditional_accuracy(noise_features.logits, noise_labels) - 0.25) < 0.1
    assert val_features.pool.shape == (100, 128) and val_features.spatial.shape == (100, 8 * 8 * 7)
    assert val_features.logits.shape == (100, 4)


def test_judge_fd_separates_real_from_noise(judge_run):
    judge = build_extractor(f'judge:{judge_run["checkpoint"]}')
    train = extract_features(judge, _load(judge_run['train'])[0]).pool
    val = extract_features(judge, _load(judge_run['val'])[0]).pool
    noise = extract_features(judge, _load(judge_run['noise'])[0]).pool
    assert frechet_distance_of(val, train) < 0.02 * frechet_distance_of(noise, train)


# ---- tools/generation/evaluate.py --------------------------------------------------------------------------------

def test_evaluate_cli_reports_real_images_as_good_and_noise_as_bad(judge_run, tmp_path):
    """Real held-out images through the command line (a process of its own), noise through the same main()."""
    extractor = f'judge:{judge_run["checkpoint"]}'
    real_json, noise_json = tmp_path / 'val.json', tmp_path / 'noise.json'
    # one IS split: the val file is sorted by class, so ADM's consecutive splits of 10 images would each see one class
    result = run_command([sys.executable, EVALUATE, str(judge_run['val']), '--ref', str(judge_run['train']),
                          '--extractor', extractor, '--splits', '1', '--out-json', str(real_json)])
    assert f'python evaluations/evaluator.py {judge_run["train"]} {judge_run["val"]}' in result.stdout
    assert 'judge accuracy on the conditioning labels' in result.stdout
    _tool_main(EVALUATE)([str(judge_run['noise']), '--ref', str(judge_run['train']), '--extractor', extractor,
                          '--splits', '1', '--out-json', str(noise_json)])
    real, noise = json.loads(real_json.read_text()), json.loads(noise_json.read_text())
    assert real['accuracy'] >= 0.95 and abs(noise['accuracy'] - 0.25) < 0.1
    assert real['fd'] < 0.02 * noise['fd'] and real['sfid'] < noise['sfid']
    assert real['precision'] > 0.8 and real['recall'] > 0.8 and noise['precision'] == noise['recall'] == 0
    assert real['inception_score'] > 2 * noise['inception_score']
    assert 0.8 < real['nn_ratio'] < 1.25 and noise['nn_ratio'] > 2 and real['copy_fraction'] == 0


def test_adm_command_names_the_files_by_absolute_path(tmp_path, monkeypatch):
    """The ADM evaluator runs from its own clone, so relative paths given here would not find the files there."""
    monkeypatch.chdir(tmp_path)
    command = runpy.run_path(EVALUATE, run_name='tool')['adm_command']('ref.npz', 'out/samples.npz')
    expected = f'  python evaluations/evaluator.py {tmp_path}/ref.npz {tmp_path}/out/samples.npz'
    assert command.splitlines()[-1] == expected


@pytest.mark.parametrize('space', ['pixels', 'features'])
def test_evaluate_flags_copies_of_the_reference(judge_run, tmp_path, space):
    train, labels = _load(judge_run['train'])
    copies = tmp_path / 'copies.npz'
    save_sample_npz(str(copies), train[:100], labels[:100])
    _tool_main(EVALUATE)([str(copies), '--ref', str(judge_run['train']), '--extractor',
                          f'judge:{judge_run["checkpoint"]}', '--memorisation', space,
                          '--out-json', str(tmp_path / 'm.json')])
    report = json.loads((tmp_path / 'm.json').read_text())
    assert report['copy_fraction'] == 1.0 and report['nn_ratio'] < 1e-3  # 0 up to cdist's round-off


def test_evaluate_memorisation_in_features_uses_the_holdout_and_none_skips_it(judge_run, tmp_path, capsys):
    common = [str(judge_run['noise']), '--ref', str(judge_run['train']), '--extractor',
              f'judge:{judge_run["checkpoint"]}']
    _tool_main(EVALUATE)([*common, '--memorisation', 'features', '--holdout', str(judge_run['val']),
                          '--out-json', str(tmp_path / 'f.json')])
    report = json.loads((tmp_path / 'f.json').read_text())
    assert 'memorisation (judge feature L2)' in capsys.readouterr().out
    assert report['nn_ratio'] > 2 and report['copy_fraction'] == 0  # noise is far from the real images
    judge = build_extractor(f'judge:{judge_run["checkpoint"]}')
    val, train = (extract_features(judge, _load(judge_run[name])[0]).pool.double().numpy() for name in ('val', 'train'))
    nearest = np.linalg.norm(val[:, None] - train[None], axis=-1).min(axis=1)
    assert report['median_nn_reference'] == pytest.approx(np.median(nearest), rel=1e-5)
    _tool_main(EVALUATE)([*common, '--memorisation', 'none', '--out-json', str(tmp_path / 'n.json')])
    assert 'memorisation' not in capsys.readouterr().out.split('For numbers')[0]
    assert 'nn_ratio' not in json.loads((tmp_path / 'n.json').read_text())


def _error_line(argv, capsys) -> str:
    with pytest.raises(SystemExit) as error:
        _tool_main(EVALUATE)(argv)
    message = str(error.value.code)
    assert '\n' not in message and 'Traceback' not in message
    return message


def _error_report(argv, capsys) -> str:
    """The whole report of a user error: the detail lines on stderr (the leading clauses of a message too long for
    one line, which depends on the length of the test's paths) and the last line, joined by spaces."""
    capsys.readouterr()
    last = _error_line(argv, capsys)
    details = capsys.readouterr().err.split()
    return ' '.join([*details, *last.split(': ', 1)[1:]]) if details else last


def test_evaluate_ends_with_one_line_and_status_1_for_a_missing_file(tmp_path, capsys, monkeypatch):
    # SystemExit with a message: Python prints it to stderr and exits with status 1
    monkeypatch.chdir(tmp_path)  # a short path keeps the whole message on the last line
    assert _error_line(['none.npz', '--ref', 'none.npz', '--extractor', 'judge:x.pth'], capsys) == (
        'SampleFileError: none.npz does not exist; give an .npz written by tools/generation/sample.py or '
        'tools/generation/make_reference_npz.py.')


@pytest.mark.parametrize('arrays,expected', [
    (dict(images=np.zeros((2, 8, 8, 3), np.uint8)), 'has no arr_0'),
    (dict(arr_0=np.zeros((2, 8, 8, 3), np.float32)), 'arr_0 must be uint8 images N x H x W x 3'),
    (dict(arr_0=np.zeros((2, 3, 8, 8), np.uint8)), 'arr_0 must be uint8 images N x H x W x 3'),
    (dict(arr_0=np.zeros((2, 8, 8, 3), np.uint8), arr_1=np.zeros(3, np.int64)), 'one integer label per image'),
], ids=['no-arr_0', 'float', 'nchw', 'labels'])
def test_evaluate_refuses_a_wrong_npz_layout_in_one_line(tmp_path, capsys, arrays, expected):
    bad, good = tmp_path / 'bad.npz', tmp_path / 'good.npz'
    np.savez(bad, **arrays)
    save_sample_npz(str(good), _noise(8, 8))
    assert expected in _error_report([str(bad), '--ref', str(good), '--extractor', 'judge:x.pth'], capsys)
    assert expected in _error_report([str(good), '--ref', str(bad), '--extractor', 'judge:x.pth'], capsys)


def test_evaluate_refuses_references_of_another_size_and_bad_extractors(tmp_path, capsys):
    samples, small = tmp_path / 's.npz', tmp_path / 'small.npz'
    save_sample_npz(str(samples), _noise(12, 16))
    save_sample_npz(str(small), _noise(12, 8))
    assert '--ref images are 8x8 but the samples 16x16' in _error_report(
        [str(samples), '--ref', str(small), '--extractor', 'judge:x.pth'], capsys)
    assert '--k must be at least 1 and below the number of samples' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', 'judge:x.pth', '--k', '12'], capsys)
    assert '--splits must be in [1, 12]' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', 'judge:x.pth', '--splits', '13'], capsys)
    assert '--extractor must be judge:CKPT, inception:WEIGHTS or inception' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', 'clip:x.pth'], capsys)
    assert f'judge checkpoint {tmp_path / "x.pth"} does not exist' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', f'judge:{tmp_path / "x.pth"}'], capsys)
    torch.save(dict(state_dict={}), tmp_path / 'bare.pth')
    assert 'holds no config in its meta' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', f'judge:{tmp_path / "bare.pth"}'], capsys)
    assert 'Inception weights' in _error_report(
        [str(samples), '--ref', str(samples), '--extractor', f'inception:{tmp_path / "none.pth"}'], capsys)


# ---- Inception (torch-fidelity's TF-FID port) ---------------------------------------------------------------------

def _random_inception_weights(path: Path) -> Path:
    """A randomly initialised state dict of torch-fidelity's Inception (its real file is a download)."""
    from unittest import mock

    import torch_fidelity.feature_extractor_inceptionv3 as library
    with mock.patch.object(library, 'load_state_dict_from_url', lambda *args, **kwargs: None), \
            mock.patch.object(library.FeatureExtractorInceptionV3, 'load_state_dict', lambda self, state: None):
        torch.manual_seed(0)
        network = library.FeatureExtractorInceptionV3('inception-v3-compat', ['2048'])
    torch.save(network.state_dict(), path)
    return path


@pytest.fixture(scope='module')
def inception_weights(tmp_path_factory) -> Path:
    return _random_inception_weights(tmp_path_factory.mktemp('inception') / 'weights-inception-random.pth')


def test_inception_extractor_is_the_library_s_network_plus_adm_s_spatial_map(inception_weights):
    import torch_fidelity
    from torch_fidelity.utils import create_feature_extractor
    images = torch.from_numpy(_noise(2, 32)).permute(0, 3, 1, 2).contiguous()
    ours = build_extractor(f'inception:{inception_weights}')
    features = extract_features(ours, _noise(2, 32))
    assert features.pool.shape == (2, 2048) and features.logits.shape == (2, 1008)
    assert features.spatial.shape == (2, 17 * 17 * 7)
    library = create_feature_extractor('inception-v3-compat', ['2048', 'logits_unbiased'], cuda=False,
                                       feature_extractor_weights_path=str(inception_weights), verbose=False)
    pool, logits = library(images)
    torch.testing.assert_close(features.pool, pool)
    torch.testing.assert_close(features.logits, logits)
    maps = []  # ADM's mixed_6/conv: the 1x1 branch of Mixed_6d, first 7 channels, flattened height x width x channel
    library.Mixed_6d.branch1x1.register_forward_hook(lambda _m, _i, output: maps.append(output))
    library(images)
    torch.testing.assert_close(features.spatial, maps[0][:, :7].permute(0, 2, 3, 1).reshape(2, -1))
    assert 'inception-v3-compat-adm' in torch_fidelity.registry.FEATURE_EXTRACTORS_REGISTRY


def test_inception_extractor_refuses_a_torchvision_state_dict(tmp_path):
    from torchvision.models import inception_v3
    torch.save(inception_v3(weights=None, aux_logits=True, init_weights=False).state_dict(), tmp_path / 'tv.pth')
    with pytest.raises(ExtractorError, match="not torch-fidelity's Inception-v3 state dict"):
        build_extractor(f'inception:{tmp_path / "tv.pth"}')


def _oracle_fid(features: np.ndarray, mu: np.ndarray, sigma: np.ndarray) -> float:
    """FID of ``features`` (n, D) against N(mu, sigma). With S1 = Xc^T Xc / (n - 1) (Xc: the centred features), the
    non-zero eigenvalues of S1 sigma are those of the small symmetric Xc sigma Xc^T / (n - 1), so
    tr (S1 sigma)^1/2 needs no D x D matrix root."""
    n, centred = len(features), features - features.mean(0)
    small = centred @ sigma @ centred.T / (n - 1)
    trace_root = np.sqrt(np.clip(np.linalg.eigvalsh((small + small.T) / 2), 0, None)).sum()
    trace_s1 = np.sum(centred ** 2) / (n - 1)
    return float(np.sum((features.mean(0) - mu) ** 2) + trace_s1 + np.trace(sigma) - 2 * trace_root)


def test_fid_against_the_statistics_stored_in_an_adm_reference_file(inception_weights, tmp_path):
    """The FID-50K path at toy size: --ref holds arr_0 and mu / sigma / mu_s / sigma_s (as ADM's
    VIRTUAL_imagenet256_labeled.npz); FID and sFID are measured against the stored statistics, not the images."""
    samples, reference = _noise(10, 32, seed=1), _noise(10, 32, seed=2)
    extractor = build_extractor(f'inception:{inception_weights}')
    fake = extract_features(extractor, samples)
    rng = np.random.default_rng(3)
    stored = {}
    for mu, sigma, dims in (('mu', 'sigma', 2048), ('mu_s', 'sigma_s', 2023)):
        factor = rng.normal(size=(dims, 16)) * 0.1
        stored.update({mu: rng.normal(size=dims) * 0.1, sigma: factor @ factor.T})
    np.savez(tmp_path / 'ref.npz', arr_0=reference, **stored)
    save_sample_npz(str(tmp_path / 'samples.npz'), samples)
    argv = [str(tmp_path / 'samples.npz'), '--ref', str(tmp_path / 'ref.npz'), '--extractor',
            f'inception:{inception_weights}', '--memorisation', 'none']
    _tool_main(EVALUATE)([*argv, '--out-json', str(tmp_path / 'npz.json')])
    report = json.loads((tmp_path / 'npz.json').read_text())
    assert report['fd'] == pytest.approx(_oracle_fid(fake.pool.double().numpy(), stored['mu'], stored['sigma']),
                                         rel=1e-4)
    assert report['sfid'] == pytest.approx(
        _oracle_fid(fake.spatial.double().numpy(), stored['mu_s'], stored['sigma_s']), rel=1e-4)


def test_judge_fid_against_stored_statistics_or_the_reference_images(judge_random, tmp_path):
    """--ref-stats npz measures against the file's mu / sigma, images against its images' features; auto keeps to the
    images for a judge (the statistics ADM stores are Inception's)."""
    samples, reference = _noise(20, 32, seed=1), _noise(30, 32, seed=2)
    extractor = build_extractor(f'judge:{judge_random}')
    fake, real = (extract_features(extractor, images).pool.double().numpy() for images in (samples, reference))
    mu, sigma = real.mean(0) + 0.05, np.cov(real, rowvar=False) * 1.5
    np.savez(tmp_path / 'ref.npz', arr_0=reference, mu=mu, sigma=sigma)
    save_sample_npz(str(tmp_path / 'samples.npz'), samples)
    reports = {}
    for mode in ('npz', 'images', 'auto'):
        _tool_main(EVALUATE)([str(tmp_path / 'samples.npz'), '--ref', str(tmp_path / 'ref.npz'), '--extractor',
                              f'judge:{judge_random}', '--memorisation', 'none', '--ref-stats', mode,
                              '--out-json', str(tmp_path / f'{mode}.json')])
        reports[mode] = json.loads((tmp_path / f'{mode}.json').read_text())
    assert reports['npz']['fd'] == pytest.approx(_oracle_fid(fake, mu, sigma), rel=1e-5)
    assert reports['images']['fd'] == pytest.approx(
        _oracle_fid(fake, real.mean(0), np.cov(real, rowvar=False)), rel=1e-5)
    assert reports['auto'] == reports['images'] and reports['npz']['fd'] != pytest.approx(reports['images']['fd'])
    assert reports['npz']['sfid'] == reports['images']['sfid']  # the file stores no mu_s / sigma_s


def test_stored_statistics_that_are_missing_or_do_not_fit_end_in_one_line(judge_random, tmp_path, capsys):
    images = _noise(12, 16)
    save_sample_npz(str(tmp_path / 'plain.npz'), images)
    np.savez(tmp_path / 'adm.npz', arr_0=images, mu=np.zeros(2048), sigma=np.eye(2048))
    np.savez(tmp_path / 'bad.npz', arr_0=images, mu=np.zeros(3), sigma=np.eye(4))
    common = ['--extractor', f'judge:{judge_random}', '--memorisation', 'none']
    assert 'plain.npz holds no mu / sigma' in _error_report(
        [str(tmp_path / 'plain.npz'), '--ref', str(tmp_path / 'plain.npz'), '--ref-stats', 'npz', *common], capsys)
    assert "the reference file's mu is 2048-d but the extractor's features are 128-d" in _error_report(
        [str(tmp_path / 'plain.npz'), '--ref', str(tmp_path / 'adm.npz'), '--ref-stats', 'npz', *common], capsys)
    assert 'bad.npz: mu must be (D,) and sigma (D, D)' in _error_report(
        [str(tmp_path / 'plain.npz'), '--ref', str(tmp_path / 'bad.npz'), '--ref-stats', 'npz', *common], capsys)


def test_a_missing_torch_fidelity_is_named_in_one_line(monkeypatch):
    from mmcausal.evaluation.fidelity import MissingMetricsLibrary, torch_fidelity
    monkeypatch.setitem(sys.modules, 'torch_fidelity', None)  # what an import of an absent package raises
    with pytest.raises(MissingMetricsLibrary, match=r'^The generation metrics need torch-fidelity: pip install'):
        torch_fidelity()


# ---- the judge as a torch-fidelity extractor ----------------------------------------------------------------------

@pytest.fixture(scope='module')
def judge_random(tmp_path_factory) -> Path:
    return random_judge_checkpoint(tmp_path_factory.mktemp('judge_random') / 'judge.pth')


def test_torch_fidelity_s_own_api_runs_the_registered_judge(judge_random, tmp_path):
    """calculate_metrics with feature_extractor='mmcausal-judge' gives evaluate.py's FID, KID and precision."""
    import torch_fidelity
    samples, reference = _noise(40, 32, seed=1), _noise(60, 32, seed=2)
    save_sample_npz(str(tmp_path / 's.npz'), samples)
    save_sample_npz(str(tmp_path / 'r.npz'), reference)
    _tool_main(EVALUATE)([str(tmp_path / 's.npz'), '--ref', str(tmp_path / 'r.npz'), '--extractor',
                          f'judge:{judge_random}', '--memorisation', 'none', '--kid-subset-size', '40',
                          '--out-json', str(tmp_path / 'ours.json')])
    ours = json.loads((tmp_path / 'ours.json').read_text())
    from torch.utils.data import TensorDataset

    class Images(TensorDataset):  # torch-fidelity's inputs are datasets of uint8 (3, H, W) tensors
        def __getitem__(self, index):
            return super().__getitem__(index)[0]

    inputs = [Images(torch.from_numpy(images).permute(0, 3, 1, 2)) for images in (samples, reference)]
    library = torch_fidelity.calculate_metrics(
        input1=inputs[0], input2=inputs[1], feature_extractor='mmcausal-judge',
        feature_extractor_weights_path=str(judge_random), fid=True, kid=True, prc=True, kid_subset_size=40,
        cuda=False, cache=False, verbose=False, save_cpu_ram=True)
    assert ours['fd'] == pytest.approx(library['frechet_inception_distance'], rel=1e-5)
    assert ours['kid'] == pytest.approx(library['kernel_inception_distance_mean'], rel=1e-5)
    assert ours['precision'] == library['precision'] and ours['recall'] == library['recall']


def test_images_from_class_folders_refuses_an_empty_folder(tmp_path):
    (tmp_path / 'a').mkdir()
    with pytest.raises(ValueError, match='holds no images'):
        images_from_class_folders(str(tmp_path))


def test_judge_features_of_npz_images_equal_those_of_the_training_pipeline(judge_run, shapes_root):
    """evaluate.py feeds RGB arrays; the judge was trained on the config's pipeline (BGR from LoadImageFromFile, BOX
    resize, data preprocessor): both routes must give the same features for the same image."""
    from mmengine.config import Config
    from mmengine.dataset import Compose
    from mmengine.registry import init_default_scope
    judge = build_extractor(f'judge:{judge_run["checkpoint"]}')
    cfg = Config.fromfile(str(ROOT / JUDGE_CONFIG))
    init_default_scope('mmpretrain')
    pipeline = Compose(cfg.test_pipeline)
    files = sorted((shapes_root / 'imagenet' / 'val').glob('*/*.JPEG'))[::10]
    packed = [pipeline(dict(img_path=str(path)))['inputs'] for path in files]
    with torch.no_grad():
        inputs = judge.model.data_preprocessor(dict(inputs=torch.stack(packed)), False)['inputs']
        expected = judge.model.neck(judge.model.extract_feat(inputs, stage='backbone'))[-1]
    val, _ = _load(judge_run['val'])
    torch.testing.assert_close(extract_features(judge, val[::10]).pool, expected, rtol=1e-4, atol=1e-4)


# ---- GenerationMetric ---------------------------------------------------------------------------------------------

def _data_samples(images: np.ndarray, labels: np.ndarray) -> list:
    """What a generator's predict() returns: mmpretrain DataSamples with ``pred_img`` uint8 (3, H, W) RGB."""
    from mmpretrain.structures import DataSample
    samples = []
    for image, label in zip(images, labels):
        sample = DataSample().set_gt_label(int(label))
        sample.pred_img = torch.from_numpy(image).permute(2, 0, 1).contiguous()
        samples.append(sample)
    return samples


def test_generation_metric_in_an_mmengine_evaluator_equals_the_tool(judge_run, tmp_path):
    from mmengine.evaluator import Evaluator
    extractor = f'judge:{judge_run["checkpoint"]}'
    evaluator = Evaluator(dict(type='GenerationMetric', extractor=extractor, reference=str(judge_run['train'])))
    val, labels = _load(judge_run['val'])
    for start in range(0, len(val), 32):  # batches, as a val loop hands them over
        evaluator.process(_data_samples(val[start:start + 32], labels[start:start + 32]))
    metrics = evaluator.evaluate(len(val))
    _tool_main(EVALUATE)([str(judge_run['val']), '--ref', str(judge_run['train']), '--extractor', extractor,
                          '--out-json', str(tmp_path / 'tool.json')])
    expected = json.loads((tmp_path / 'tool.json').read_text())
    assert metrics == pytest.approx({f'gen/{name}': value for name, value in expected.items()}, rel=1e-6, abs=1e-9)
    assert metrics['gen/accuracy'] >= 0.95


@pytest.mark.parametrize('library', ['mmpretrain', 'mmseg', 'mmdet'])
def test_generation_metric_resolves_from_every_library(library):
    import importlib

    from mmcausal.evaluation import GenerationMetric
    registry = importlib.import_module(f'{library}.registry')
    importlib.import_module(f'{library}.evaluation')
    assert registry.METRICS.get('GenerationMetric') is GenerationMetric


def test_generation_metric_refuses_images_that_are_not_uint8_chw():
    from mmcausal.evaluation import GenerationMetric
    metric = GenerationMetric(extractor='judge:x.pth', reference='r.npz')
    with pytest.raises(ValueError, match=r'pred_img must be a uint8 \(3, H, W\) image'):
        metric.process({}, [dict(pred_img=torch.zeros(8, 8, 3, dtype=torch.uint8))])
