"""Log-likelihoods and pruned posteriors against Kaldi (DiagGmm, VectorToPosteriorEntry)."""

import numpy as np
import pytest
from ivector_golden import UTTS

from paravg.ivector.posteriors import SparsePosteriors, posteriors_from_loglikes


@pytest.mark.parametrize("u", UTTS)
def test_log_likelihoods_match_kaldi(golden_dgmm, gmm_data, u):
    ll = golden_dgmm.log_likelihoods(gmm_data[f"feats{u}"])
    np.testing.assert_allclose(ll, gmm_data[f"utt{u}_dgmm_loglikes"], atol=1e-4, rtol=0)


def test_gconsts_include_log_weights(golden_dgmm, gmm_data):
    np.testing.assert_allclose(golden_dgmm.gconsts, gmm_data["dgmm_gconsts"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("u", UTTS)
def test_posterior_support_and_values_match_kaldi(gmm_data, u):
    ll = gmm_data[f"utt{u}_dgmm_loglikes"].astype(np.float64)
    post, _ = posteriors_from_loglikes(ll, num_gselect=5, min_post=0.025, scale=1.0)
    dense = post.to_dense(8)
    expected = gmm_data[f"utt{u}_post_unscaled"]
    np.testing.assert_array_equal(dense > 0, expected > 0)
    np.testing.assert_allclose(dense, expected, atol=5e-6, rtol=0)
    scaled, _ = posteriors_from_loglikes(ll, 5, 0.025, scale=0.1)
    np.testing.assert_allclose(scaled.to_dense(8), gmm_data[f"utt{u}_post_scaled"], atol=5e-6)


def test_support_sizes_exercise_both_prunings(gmm_data):
    """The golden frames keep 1..5 Gaussians in Kaldi's proportions (README table)."""
    kept = []
    for u in UTTS:
        post, _ = posteriors_from_loglikes(gmm_data[f"utt{u}_dgmm_loglikes"], 5, 0.025)
        kept.append((post.index >= 0).sum(axis=1))
    counts = np.bincount(np.concatenate(kept), minlength=6)[1:]
    assert counts.tolist() == [278, 249, 279, 159, 96]


def test_cutoff_is_computed_once_before_pruning():
    # values 1, 0.0262, 0.0258, 0.0256: tot 1.0776, cutoff 0.02694 -> all three small ones
    # go. Recomputing the cutoff after each drop would keep 0.0262 (tot 1.0262, cutoff
    # 0.02566), as the README notes a naive version does on 3 of the golden frames.
    ll = np.log(np.array([[1.0, 0.0262, 0.0258, 0.0256]]))
    post, _ = posteriors_from_loglikes(ll, 5, 0.025)
    assert (post.index >= 0).sum() == 1
    np.testing.assert_allclose(post.value[0, 0], 1.0)
    # a value above the once-computed cutoff survives; the others go
    ll = np.log(np.array([[1.0, 0.0270, 0.0258, 0.0256]]))
    post, _ = posteriors_from_loglikes(ll, 5, 0.025)
    assert sorted(post.index[0][post.index[0] >= 0].tolist()) == [0, 1]
    np.testing.assert_allclose(post.value[0][:2], np.array([1.0, 0.027]) / 1.027)


def test_posteriors_sum_to_scale_and_top_n():
    rng = np.random.default_rng(0)
    ll = rng.normal(0, 3, (50, 20))
    post, _ = posteriors_from_loglikes(ll, 3, 0.0, scale=0.2)
    np.testing.assert_allclose(post.value.sum(axis=1), 0.2)
    assert post.index.shape == (50, 3)
    best = np.argsort(-ll, axis=1)[:, :3]
    np.testing.assert_array_equal(post.index, best)


def test_sparse_concatenate_pads():
    a = SparsePosteriors(np.array([[0, 1]], np.int32), np.array([[0.5, 0.5]]))
    b = SparsePosteriors(np.array([[2]], np.int32), np.array([[1.0]]))
    c = SparsePosteriors.concatenate([a, b], 2)
    np.testing.assert_array_equal(c.index, [[0, 1], [2, -1]])
    np.testing.assert_array_equal(c.to_dense(3), [[0.5, 0.5, 0], [0, 0, 1.0]])
