"""Splicing and PCA (splice-feats, est-pca)."""

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.ivector.pca import PcaStats, apply_affine, splice


def test_splice_repeats_edge_frames():
    x = np.arange(12, dtype=float).reshape(4, 3)
    s = splice(x, 1)
    assert s.shape == (4, 9)
    np.testing.assert_array_equal(s[0], np.concatenate([x[0], x[0], x[1]]))
    np.testing.assert_array_equal(s[2], np.concatenate([x[1], x[2], x[3]]))
    np.testing.assert_array_equal(s[3], np.concatenate([x[2], x[3], x[3]]))
    np.testing.assert_array_equal(splice(x, 0), x)


def test_pca_centres_and_whitens_estimation_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 6)) @ rng.normal(size=(6, 6)) + rng.normal(size=6) * 5
    stats = PcaStats(6)
    stats.add(x[:1500])
    stats.add(x[1500:])
    T = stats.estimate(4)
    assert T.shape == (4, 7)
    y = apply_affine(T, x)
    np.testing.assert_allclose(y.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(np.cov(y.T, bias=True), np.eye(4), atol=1e-10)
    # the kept directions carry the largest variances, in decreasing order
    full = apply_affine(PcaStats_from(x).estimate(6, normalize_variance=False), x)
    v = full.var(axis=0)
    assert np.all(np.diff(v) <= 1e-9)
    assert np.allclose(np.abs(np.corrcoef(full[:, :4].T, y.T)[:4, 4:]), np.eye(4), atol=1e-8)


def PcaStats_from(x):
    s = PcaStats(x.shape[1])
    s.add(x)
    return s


def test_without_mean_normalisation_the_transform_is_linear():
    rng = np.random.default_rng(1)
    T = PcaStats_from(rng.normal(size=(100, 3))).estimate(2, normalize_mean=False)
    assert T.shape == (2, 3)


def test_errors():
    with pytest.raises(DataError, match="at least 2 frames"):
        PcaStats(3).estimate(2)
    with pytest.raises(DataError, match="columns"):
        apply_affine(np.zeros((2, 5)), np.zeros((3, 3)))
