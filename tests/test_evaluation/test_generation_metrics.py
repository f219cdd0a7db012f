"""The generation metrics (torch-fidelity under mmcausal's wrappers, with ADM's settings) against closed forms and
numpy / scipy oracles written from the definitions (which never import mmcausal), and the memorisation check."""
import numpy as np
import pytest
import scipy.linalg

from mmcausal.evaluation import (
    feature_statistics,
    frechet_distance,
    frechet_distance_of,
    inception_score,
    kernel_distance,
    kth_neighbour_distances,
    memorisation_check,
    precision_recall,
)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _stats(mu, sigma):
    return dict(mu=np.asarray(mu, np.float64), sigma=np.asarray(sigma, np.float64))


def _fid_oracle(mu1, sigma1, mu2, sigma2):
    """FID = ||mu1 - mu2||^2 + tr(S1 + S2 - 2 (S1 S2)^1/2), the matrix root by scipy (as ADM's evaluator)."""
    root = scipy.linalg.sqrtm(sigma1 @ sigma2).real
    return float(np.sum((mu1 - mu2) ** 2) + np.trace(sigma1) + np.trace(sigma2) - 2 * np.trace(root))


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
    assert frechet_distance(_stats(mu1, np.diag(std1 ** 2)), _stats(mu2, np.diag(std2 ** 2))) == pytest.approx(
        expected, rel=1e-10)


def test_frechet_distance_of_non_commuting_2x2_covariances_matches_the_closed_form():
    # for 2x2 PSD M: tr sqrt(M) = sqrt(tr M + 2 sqrt(det M)); with M = S1^1/2 S2 S1^1/2, tr M = tr(S1 S2)
    # and det M = det S1 det S2
    s1 = np.array([[2.0, 0.9], [0.9, 1.0]])
    s2 = np.array([[0.5, -0.3], [-0.3, 3.0]])
    assert not np.allclose(s1 @ s2, s2 @ s1)
    trace_sqrt = np.sqrt(np.trace(s1 @ s2) + 2 * np.sqrt(np.linalg.det(s1) * np.linalg.det(s2)))
    mu1, mu2 = np.array([0.3, -1.0]), np.array([1.0, 0.5])
    expected = np.sum((mu1 - mu2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * trace_sqrt
    assert frechet_distance(_stats(mu1, s1), _stats(mu2, s2)) == pytest.approx(expected, rel=1e-10)


def test_frechet_distance_from_stored_statistics_equals_a_scipy_oracle():
    """The FID-50K path: sample statistics against a reference file's mu / sigma (ADM's stored pool_3 statistics)."""
    samples, reference = _rng().normal(size=(400, 12)), _rng(1).normal(size=(600, 12)) * 1.3 + 0.2
    mu, sigma = reference.mean(0), np.cov(reference, rowvar=False)
    expected = _fid_oracle(samples.mean(0), np.cov(samples, rowvar=False), mu, sigma)
    assert frechet_distance(feature_statistics(samples), _stats(mu, sigma)) == pytest.approx(expected, rel=1e-8)
    assert frechet_distance_of(samples, reference) == pytest.approx(expected, rel=1e-8)


def test_frechet_distance_stays_finite_for_rank_deficient_covariances():
    # fewer samples than dimensions: singular covariances, where scipy's sqrtm returns complex parts
    a, b = _rng().normal(size=(10, 64)), _rng(1).normal(size=(10, 64)) + 0.1
    distance = frechet_distance_of(a, b)
    assert np.isfinite(distance) and distance > 0
    assert frechet_distance_of(a, a) == pytest.approx(0, abs=1e-5)  # eigenvalues of S S: round-off only


def test_feature_statistics_are_the_mean_and_unbiased_covariance():
    features = _rng().normal(size=(50, 4))
    stats = feature_statistics(features)
    assert stats['mu'].dtype == stats['sigma'].dtype == np.float64
    np.testing.assert_allclose(stats['mu'], features.mean(0), rtol=1e-12)
    np.testing.assert_allclose(stats['sigma'], np.cov(features, rowvar=False), rtol=1e-12)


def test_frechet_distance_refuses_statistics_of_different_dimensions():
    with pytest.raises(ValueError, match='different dimensions'):
        frechet_distance(_stats(np.zeros(3), np.eye(3)), _stats(np.zeros(4), np.eye(4)))


# ---- Inception Score -----------------------------------------------------------------------------------------------

def _softmax(logits):
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize('num_classes', [2, 4, 10])
def test_inception_score_of_confident_uniform_predictions_is_the_number_of_classes(num_classes):
    logits = 60 * np.eye(num_classes)[np.arange(10 * num_classes) % num_classes]
    assert inception_score(logits)['inception_score'] == pytest.approx(num_classes, rel=1e-9)


def test_inception_score_of_identical_predictions_is_one():
    logits = np.tile([[2.0, 0.5, -1.0]], (20, 1))
    assert inception_score(logits) == pytest.approx(dict(inception_score=1.0, inception_score_std=0), abs=1e-12)


def test_inception_score_uses_adm_s_10_consecutive_splits():
    """ADM: exp(mean KL(p(y|x) || p(y))) on consecutive, unshuffled splits (of 5,000 of 50,000), then the mean."""
    logits = _rng().normal(size=(200, 6)) * 3
    logits[:100] += 4 * np.eye(6)[np.arange(100) % 2]  # splits differ: the first half favours two classes

    def score(p):
        return np.exp(np.mean(np.sum(p * (np.log(p) - np.log(p.mean(0))), axis=1)))

    scores = [score(_softmax(part)) for part in np.split(logits, 10)]
    result = inception_score(logits)
    assert result['inception_score'] == pytest.approx(np.mean(scores), rel=1e-9)
    assert result['inception_score_std'] == pytest.approx(np.std(scores), rel=1e-9)
    assert inception_score(logits, splits=1)['inception_score'] != pytest.approx(np.mean(scores), rel=1e-3)


def test_inception_score_refuses_more_splits_than_samples():
    with pytest.raises(ValueError, match='splits must be in'):
        inception_score(_rng().normal(size=(5, 4)))


# ---- KID -----------------------------------------------------------------------------------------------------------

def test_kid_of_one_distribution_is_about_zero_and_grows_with_a_shift():
    real, fake = _rng().normal(size=(300, 8)), _rng(1).normal(size=(300, 8))
    same = kernel_distance(real, fake, subset_size=100)
    shifted = kernel_distance(real, fake + 1, subset_size=100)
    assert abs(same['kid']) < 0.05 and shifted['kid'] > 1


def test_kid_on_whole_sets_equals_the_unbiased_mmd2_of_the_cubic_kernel():
    real, fake = _rng().normal(size=(40, 5)), _rng(1).normal(size=(40, 5)) + 0.3

    def kernel(x, y):
        return (x @ y.T / x.shape[1] + 1) ** 3

    m = len(real)
    k_ff, k_rr, k_fr = kernel(fake, fake), kernel(real, real), kernel(fake, real)
    expected = ((k_ff.sum() - np.trace(k_ff)) + (k_rr.sum() - np.trace(k_rr))) / (m * (m - 1)) - 2 * k_fr.mean()
    # one subset of all the features: the subsets are permutations, and the estimate does not depend on the order
    result = kernel_distance(real, fake, subset_size=m, subsets=1)
    assert result['kid'] == pytest.approx(expected, rel=1e-4)


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
def test_precision_recall_equals_a_brute_force_oracle(k):
    real = _rng().normal(size=(130, 6))
    fake = _rng(1).normal(size=(97, 6)) * 1.5 + 0.5
    expected = dict(precision=_brute_force_coverage(fake, real, k), recall=_brute_force_coverage(real, fake, k))
    assert 0 < expected['precision'] < 1 and 0 < expected['recall'] < 1
    assert precision_recall(real, fake, k=k) == pytest.approx(expected, abs=1e-6)  # float32 means of 0 / 1


def test_kth_neighbour_counts_duplicates_but_not_the_point_itself():
    points = np.array([[0.], [0.], [3.], [7.]])
    np.testing.assert_allclose(kth_neighbour_distances(points, 1, chunk=3).numpy(), [0, 0, 3, 4])
    np.testing.assert_allclose(kth_neighbour_distances(points, 2, chunk=3).numpy(), [3, 3, 3, 7])


def test_precision_recall_refuses_a_k_as_large_as_the_set():
    with pytest.raises(ValueError, match='k must be in'):
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
