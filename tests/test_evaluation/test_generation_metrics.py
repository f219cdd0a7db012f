"""The metric maths against closed forms and brute-force numpy oracles (which never import mmcausal)."""
import numpy as np
import pytest

from mmcausal.evaluation import (
    feature_statistics,
    frechet_distance,
    frechet_distance_of,
    inception_score,
    kth_neighbour_distances,
    memorisation_check,
    precision_recall,
    spatial_frechet_distance,
)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- Fréchet distance ----------------------------------------------------------------------------------------------

def test_frechet_distance_of_a_set_with_itself_is_zero():
    features = _rng().normal(size=(500, 16))
    assert frechet_distance_of(features, features) == pytest.approx(0, abs=1e-8)


def test_frechet_distance_of_shifted_copies_is_the_squared_mean_shift():
    features = _rng().normal(size=(300, 8))
    shift = _rng(1).normal(size=8)
    assert frechet_distance_of(features, features + shift) == pytest.approx(float(shift @ shift), rel=1e-9)


def test_frechet_distance_of_diagonal_gaussians_is_the_sum_of_squared_std_differences():
    mu1, mu2 = np.array([0., 1, 2]), np.array([1., 1, -1])
    std1, std2 = np.array([1., 2, 3]), np.array([2., 2, 0.5])
    expected = np.sum((mu1 - mu2) ** 2) + np.sum((std1 - std2) ** 2)
    assert frechet_distance(mu1, np.diag(std1 ** 2), mu2, np.diag(std2 ** 2)) == pytest.approx(expected, rel=1e-10)


def test_frechet_distance_of_non_commuting_2x2_covariances_matches_the_closed_form():
    # for 2x2 PSD M: tr sqrt(M) = sqrt(tr M + 2 sqrt(det M)); with M = S1^1/2 S2 S1^1/2, tr M = tr(S1 S2)
    # and det M = det S1 det S2
    s1 = np.array([[2.0, 0.9], [0.9, 1.0]])
    s2 = np.array([[0.5, -0.3], [-0.3, 3.0]])
    assert not np.allclose(s1 @ s2, s2 @ s1)
    trace_sqrt = np.sqrt(np.trace(s1 @ s2) + 2 * np.sqrt(np.linalg.det(s1) * np.linalg.det(s2)))
    mu1, mu2 = np.array([0.3, -1.0]), np.array([1.0, 0.5])
    expected = np.sum((mu1 - mu2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * trace_sqrt
    assert frechet_distance(mu1, s1, mu2, s2) == pytest.approx(expected, rel=1e-10)


def test_frechet_distance_stays_finite_and_non_negative_for_rank_deficient_covariances():
    # fewer samples than dimensions: singular covariances, where scipy's sqrtm returns complex parts
    a, b = _rng().normal(size=(10, 64)), _rng(1).normal(size=(10, 64)) + 0.1
    distance = frechet_distance_of(a, b)
    assert np.isfinite(distance) and distance > 0
    assert frechet_distance_of(a, a) == pytest.approx(0, abs=1e-8)


def test_feature_statistics_are_the_mean_and_unbiased_covariance():
    features = _rng().normal(size=(50, 4))
    mu, sigma = feature_statistics(features)
    np.testing.assert_allclose(mu.numpy(), features.mean(0), rtol=1e-12)
    np.testing.assert_allclose(sigma.numpy(), np.cov(features, rowvar=False), rtol=1e-12)


def test_spatial_frechet_distance_flattens_the_maps():
    maps = _rng().normal(size=(40, 2, 3, 3))
    shift = _rng(1).normal(size=(1, 2, 3, 3))
    assert spatial_frechet_distance(maps, maps + shift) == pytest.approx(float((shift ** 2).sum()), rel=1e-9)


def test_frechet_distance_refuses_statistics_of_different_dimensions():
    with pytest.raises(ValueError, match='different dimensions'):
        frechet_distance(np.zeros(3), np.eye(3), np.zeros(4), np.eye(4))


# ---- Inception Score -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize('num_classes', [2, 4, 10])
def test_inception_score_of_confident_uniform_predictions_is_the_number_of_classes(num_classes):
    probs = np.eye(num_classes)[np.arange(5 * num_classes) % num_classes]
    assert inception_score(probs) == pytest.approx(num_classes, rel=1e-9)


def test_inception_score_of_identical_predictions_is_one():
    probs = np.tile([[0.7, 0.2, 0.1]], (20, 1))
    assert inception_score(probs) == pytest.approx(1.0, rel=1e-12)


def test_inception_score_matches_its_definition_per_split():
    probs = _rng().dirichlet(np.ones(5) * 0.3, size=60)

    def score(p):
        marginal = p.mean(0)
        return np.exp(np.mean(np.sum(p * (np.log(p) - np.log(marginal)), axis=1)))

    expected = np.mean([score(p) for p in np.array_split(probs, 3)])
    assert inception_score(probs, splits=3) == pytest.approx(expected, rel=1e-9)


def test_inception_score_refuses_logits():
    with pytest.raises(ValueError, match='softmax'):
        inception_score(_rng().normal(size=(10, 4)))


# ---- precision / recall --------------------------------------------------------------------------------------------

def test_precision_recall_of_identical_sets_is_one_one():
    features = _rng().normal(size=(200, 5))
    assert precision_recall(features, features.copy()) == dict(precision=1.0, recall=1.0)


def test_precision_recall_of_far_disjoint_sets_is_zero_zero():
    real = _rng().normal(size=(200, 5))
    fake = _rng(1).normal(size=(150, 5)) + 100
    assert precision_recall(real, fake) == dict(precision=0.0, recall=0.0)


def _brute_force_coverage(queries, points, k):
    d_points = np.linalg.norm(points[:, None] - points[None], axis=-1)
    radii = np.sort(d_points, axis=1)[:, k]  # column 0 is the point itself
    d_queries = np.linalg.norm(queries[:, None] - points[None], axis=-1)
    return float(np.mean((d_queries <= radii[None]).any(axis=1)))


@pytest.mark.parametrize('k', [1, 3, 5])
def test_precision_recall_in_chunks_equals_a_brute_force_oracle(k):
    real = _rng().normal(size=(130, 6))
    fake = _rng(1).normal(size=(97, 6)) * 1.5 + 0.5
    expected = dict(precision=_brute_force_coverage(fake, real, k), recall=_brute_force_coverage(real, fake, k))
    assert 0 < expected['precision'] < 1 and 0 < expected['recall'] < 1
    assert precision_recall(real, fake, k=k, chunk=16) == pytest.approx(expected, abs=1e-12)


def test_kth_neighbour_counts_duplicates_but_not_the_point_itself():
    points = np.array([[0.0], [0.0], [3.0], [7.0]])
    np.testing.assert_allclose(kth_neighbour_distances(points, 1, chunk=3).numpy(), [0, 0, 3, 4])
    np.testing.assert_allclose(kth_neighbour_distances(points, 2, chunk=3).numpy(), [3, 3, 3, 7])


def test_precision_recall_refuses_a_k_as_large_as_the_set():
    with pytest.raises(ValueError, match='k must be'):
        precision_recall(np.zeros((3, 2)), np.zeros((3, 2)), k=3)


# ---- memorisation --------------------------------------------------------------------------------------------------

def test_memorisation_check_flags_copies_of_the_training_set():
    train = _rng().normal(size=(300, 20))
    copies = train[_rng(1).choice(300, 100)] + 1e-3 * _rng(2).normal(size=(100, 20))
    report = memorisation_check(copies, train)
    assert report['ratio'] < 0.01 and report['copy_fraction'] == 1.0


def test_memorisation_check_passes_fresh_samples_of_the_same_distribution():
    train, val, fresh = (_rng(seed).normal(size=(400, 20)) for seed in (0, 1, 2))
    report = memorisation_check(fresh, train, reference=val)
    assert 0.9 < report['ratio'] < 1.1 and report['copy_fraction'] == 0.0
    nearest = np.linalg.norm(fresh[:, None] - train[None], axis=-1).min(axis=1)
    assert report['median_nn_samples'] == pytest.approx(np.median(nearest), rel=1e-12)


def test_memorisation_check_without_reference_uses_leave_one_out_train_distances():
    train, fresh = _rng().normal(size=(400, 20)), _rng(1).normal(size=(400, 20))
    report = memorisation_check(fresh, train)
    d = np.linalg.norm(train[:, None] - train[None], axis=-1)
    np.fill_diagonal(d, np.inf)
    assert report['median_nn_reference'] == pytest.approx(np.median(d.min(axis=1)), rel=1e-12)
    assert 0.8 < report['ratio'] < 1.2
