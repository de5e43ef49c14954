"""The LDA-like transform of Appendix C.6 / nnet-get-feature-transform."""

import numpy as np
import pytest

from paravg.nnet.lda import LdaStats, estimate_transform


def make_data(n=6000, dim=6, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, n)
    means = np.zeros((classes, dim))
    means[:, 0] = np.arange(classes) * 3.0  # only dim 0 separates the classes
    mix = rng.normal(size=(dim, dim))
    x = (means[labels] + rng.normal(size=(n, dim))) @ mix.T + 5.0
    return x, labels


def stats_of(x, labels, classes=4, prune=0.0, seed=0):
    s = LdaStats(x.shape[1], classes)
    s.accumulate(x, labels, np.ones(len(x)), prune, np.random.default_rng(seed))
    return s


def test_transform_centres_and_scales_directions_by_class_information():
    x, labels = make_data()
    a, b = estimate_transform(
        stats_of(x, labels), within_class_factor=0.001, max_singular_value=1e9
    )
    y = x @ a.T + b
    assert np.abs(y.mean(0)).max() < 1e-8
    var = np.sort(y.var(0))[::-1]
    # one informative direction keeps a large variance, the others shrink to about w=0.001
    assert var[0] > 0.5
    assert np.all(var[1:] < 0.01)


def test_singular_values_are_capped():
    x, labels = make_data()
    a, _ = estimate_transform(stats_of(x * 1e-3, labels), 0.001, 5.0)
    assert np.linalg.svd(a, compute_uv=False).max() <= 5.0 + 1e-9


def test_rand_prune_is_unbiased_subsampling():
    x, labels = make_data(n=20000)
    full, pruned = stats_of(x, labels), stats_of(x, labels, prune=4.0, seed=1)
    assert pruned.count.sum() == pytest.approx(full.count.sum(), rel=0.05)
    assert np.allclose(
        pruned.class_sum / pruned.count[:, None], full.class_sum / full.count[:, None], atol=0.3
    )


def test_stats_are_additive():
    x, labels = make_data()
    a, b = stats_of(x[:3000], labels[:3000]), stats_of(x[3000:], labels[3000:])
    a.add(b)
    full = stats_of(x, labels)
    assert np.allclose(a.scatter, full.scatter) and np.allclose(a.class_sum, full.class_sum)


def test_constant_dimension_does_not_break_estimation():
    x, labels = make_data()
    x[:, 2] = 1.0
    a, b = estimate_transform(stats_of(x, labels), 0.001, 5.0)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))


def test_empty_stats_raise():
    with pytest.raises(ValueError, match="empty"):
        estimate_transform(LdaStats(3, 2))


def kaldi_estimate(total_covar, between, mean, w, max_sv, smooth=0.0):
    """EstimateInternal step by step (smoothing only if given), for the tests below."""
    within = total_covar - between + smooth * np.eye(len(mean))
    l_inv = np.linalg.inv(np.linalg.cholesky(within))
    u, d, _ = np.linalg.svd(l_inv @ between @ l_inv.T)
    order = np.argsort(-d)
    u, d = u[:, order], d[order]
    m = (u.T @ l_inv) * np.sqrt((w + d) / (1.0 + d))[:, None]
    uu, s, vt = np.linalg.svd(m)
    m = (uu * np.minimum(s, max_sv)) @ vt
    return m, -m @ mean


def _moments(stats):
    n = stats.count.sum()
    mean = stats.class_sum.sum(0) / n
    total = stats.scatter / n - np.outer(mean, mean)
    cm = stats.class_sum / stats.count[:, None] - mean
    between = (cm * (stats.count / n)[:, None]).T @ cm
    return total, between, mean


def _same_transform(a, b, ref_a, mean):
    # eigenvectors are defined up to sign (and rotation among equal λ): compare AᵀA, the
    # metric the transform induces, and the offset rule b = −A·mean
    np.testing.assert_allclose(a.T @ a, ref_a.T @ ref_a, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(b, -a @ mean, rtol=1e-9, atol=1e-9)


def test_nearly_singular_within_class_covariance_is_not_smoothed():
    # a direction with within-class variance ~1e-11 of the others': positive definite, so
    # Kaldi's Cholesky succeeds and nothing is added (a relative floor would change it)
    x, labels = make_data()
    noise = 1e-5 * np.random.default_rng(5).normal(size=(len(x), 1))
    x = np.concatenate([x, x[:, :1] * 1e-3 + noise], 1)
    stats = stats_of(x, labels)
    total, between, mean = _moments(stats)
    evals = np.linalg.eigvalsh(total - between)
    assert 0 < evals.min() < 1e-9 * evals.max()
    a, b = estimate_transform(stats, 0.001, 1e9)
    ref_a, _ = kaldi_estimate(total, between, mean, 0.001, 1e9)
    _same_transform(a, b, ref_a, mean)


def test_singular_within_class_covariance_gets_kaldis_smoothing():
    x, labels = make_data()
    x = np.concatenate([np.zeros((len(x), 1)), x], 1)  # a constant dimension
    stats = stats_of(x, labels)
    total, between, mean = _moments(stats)
    with pytest.raises(np.linalg.LinAlgError):
        np.linalg.cholesky(total - between)
    a, b = estimate_transform(stats, 0.001, 5.0)
    smooth = 1e-3 * np.trace(total - between) / x.shape[1]
    ref_a, _ = kaldi_estimate(total, between, mean, 0.001, 5.0, smooth)
    _same_transform(a, b, ref_a, mean)
