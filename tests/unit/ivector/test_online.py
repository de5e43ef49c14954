"""Online extraction (OnlineIvectorEstimationStats, ivector-extract-online2) against Kaldi."""

import math

import numpy as np
import pytest
from ivector_golden import UTTS, extractor_from

from paravg.errors import DataError
from paravg.ivector.cmvn import stats_of
from paravg.ivector.extractor import UtteranceStats
from paravg.ivector.features import IvectorFeaturePipeline
from paravg.ivector.online import (
    AdaptationState,
    OnlineIvectorOptions,
    OnlineIvectorStats,
    batch_starts,
    extract_from_posteriors,
    extract_speaker,
    linear_cg,
)
from paravg.ivector.ubm import DiagGmm


def run_online(ex, feats, post, stats=None, num_cg_iters=15):
    stats = stats or OnlineIvectorStats(ex.ivector_dim, ex.prior_offset)
    return extract_from_posteriors(ex, feats, post, stats, 10, num_cg_iters), stats


@pytest.mark.parametrize("num_cg_iters", [15, 0], ids=["cg", "exact"])
@pytest.mark.parametrize("u", UTTS)
def test_online_estimates_match_kaldi(golden_model, gmm_data, u, num_cg_iters):
    g = golden_model
    ex = extractor_from(g)
    res, stats = run_online(ex, gmm_data[f"feats{u}"], g[f"utt{u}_post_scaled"], None, num_cg_iters)
    np.testing.assert_allclose(res.raw, g[f"utt{u}_online_raw"], atol=1e-6, rtol=0)
    assert res.ivectors.dtype == np.float32
    np.testing.assert_allclose(res.ivectors, g[f"utt{u}_online_ivectors"], atol=2e-5, rtol=0)
    np.testing.assert_allclose(res.counts, g[f"utt{u}_online_counts"], atol=1e-5)
    np.testing.assert_allclose(stats.quadratic, g[f"utt{u}_online_end_quadratic"], atol=1e-5)
    np.testing.assert_allclose(stats.linear, g[f"utt{u}_online_end_linear"], atol=1e-5)
    assert stats.count == pytest.approx(g[f"utt{u}_online_end_count"], abs=1e-5)
    assert stats.prior_offset == g[f"utt{u}_online_end_prior_offset_f"]
    assert stats.objf_change(res.raw[-1]) == pytest.approx(
        g[f"utt{u}_online_objf_change"], abs=1e-6
    )


@pytest.mark.parametrize("mrf", [1000, 100])
def test_speaker_carry_over_with_limit_frames_matches_kaldi(golden_model, gmm_data, mrf):
    g = golden_model
    ex = extractor_from(g)
    state = AdaptationState.fresh(ex)
    for u in range(2):
        k = f"spk_mrf{mrf}_utt{u}_"
        st = state.ivector_stats
        np.testing.assert_allclose(st.quadratic, g[k + "start_quadratic"], atol=1e-5)
        np.testing.assert_allclose(st.linear, g[k + "start_linear"], atol=1e-5)
        assert st.count == pytest.approx(g[k + "start_count"], abs=1e-5)
        res = extract_from_posteriors(ex, gmm_data[f"feats{u}"], g[f"utt{u}_post_scaled"], st)
        np.testing.assert_allclose(res.raw, g[k + "online_raw"], atol=1e-6, rtol=0)
        np.testing.assert_allclose(res.ivectors, g[k + "online_ivectors"], atol=2e-5, rtol=0)
        np.testing.assert_allclose(st.count, g[k + "end_prelimit_count"], atol=1e-5)
        scale = state.limit_frames(mrf, 0.1)
        assert scale == pytest.approx(g[k + "limit_scale"], abs=1e-6)
        np.testing.assert_allclose(st.quadratic, g[k + "end_limited_quadratic"], atol=1e-5)
        np.testing.assert_allclose(st.linear, g[k + "end_limited_linear"], atol=1e-5)
        assert st.count == pytest.approx(g[k + "end_limited_count"], abs=1e-5)


def test_carry_over_changes_the_second_utterance(golden_model, gmm_data):
    ex = extractor_from(golden_model)
    fresh, _ = run_online(ex, gmm_data["feats1"], golden_model["utt1_post_scaled"])
    key = "spk_mrf1000_utt1_online_raw"
    assert np.abs(fresh.raw[-1] - golden_model[key][-1]).max() > 0.05


@pytest.mark.parametrize("u", UTTS)
def test_online_end_estimate_equals_batch_posterior_mean(golden_model, gmm_data, u):
    """The last online estimate is E[w] of the frames 0..10(n-1) it has seen."""
    ex = extractor_from(golden_model)
    x, post = gmm_data[f"feats{u}"], golden_model[f"utt{u}_post_scaled"].astype(np.float64)
    res, _ = run_online(ex, x, post, num_cg_iters=0)
    seen = 10 * (res.raw.shape[0] - 1) + 1
    stats = UtteranceStats.from_posteriors(x[:seen], post[:seen], ex.num_gauss)
    mean, _ = ex.ivector_distribution(stats)
    # the online stats hold the prior offset as float32, as Kaldi's do
    np.testing.assert_allclose(res.raw[-1], mean, atol=1e-6)
    ex32 = extractor_from(golden_model)
    ex32.prior_offset = float(np.float32(ex32.prior_offset))
    mean32, _ = ex32.ivector_distribution(stats)
    np.testing.assert_allclose(res.raw[-1], mean32, atol=1e-9)


@pytest.mark.parametrize("T", [1, 9, 10, 11, 20, 21, 153])
def test_rows_and_period_contract(golden_model, gmm_data, T):
    ex = extractor_from(golden_model)
    x, post = gmm_data["feats2"][:T], golden_model["utt2_post_scaled"][:T]
    res, _ = run_online(ex, x, post)
    assert res.ivectors.shape == (math.ceil(T / 10), ex.ivector_dim)
    # row k has seen frames 0..10k: counts grow by the posterior mass of each batch
    starts = batch_starts(T, 10)
    expected = np.cumsum(np.add.reduceat(post[: 10 * (len(starts) - 1) + 1].sum(axis=1), starts))
    np.testing.assert_allclose(res.counts, expected, rtol=1e-6)
    # a prefix of the utterance gives a prefix of the rows
    full, _ = run_online(ex, gmm_data["feats2"], golden_model["utt2_post_scaled"])
    np.testing.assert_allclose(res.raw, full.raw[: res.raw.shape[0]], atol=1e-12)
    # element 0 is reported relative to the prior offset
    assert abs(res.ivectors[0, 0]) < 0.1 * ex.prior_offset


def test_batch_starts():
    np.testing.assert_array_equal(batch_starts(1, 10), [0])
    np.testing.assert_array_equal(batch_starts(11, 10), [0, 1])
    np.testing.assert_array_equal(batch_starts(21, 10), [0, 1, 11])
    np.testing.assert_array_equal(batch_starts(25, 10), [0, 1, 11])


def test_empty_utterance_is_a_clear_error(golden_model):
    ex = extractor_from(golden_model)
    with pytest.raises(DataError, match="utt-x: has 0 frames"):
        extract_from_posteriors(
            ex, np.zeros((0, 13)), np.zeros((0, 8)), OnlineIvectorStats(10, 100.0), utt="utt-x"
        )


def test_feature_dimension_mismatch_is_a_clear_error(golden_model):
    ex = extractor_from(golden_model)
    with pytest.raises(DataError, match="expects dimension 13"):
        extract_from_posteriors(ex, np.zeros((5, 12)), np.zeros((5, 8)), OnlineIvectorStats(10, 1))


def test_linear_cg_converges_to_the_solution():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 30))
    A = A @ A.T + np.eye(30)
    b = rng.normal(size=30)
    x = linear_cg(A, b, np.zeros(30), max_iters=100)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-8)
    few = linear_cg(A, b, np.zeros(30), max_iters=3)
    f = lambda v: b @ v - 0.5 * v @ A @ v  # noqa: E731
    assert f(np.zeros(30)) < f(few) < f(x) + 1e-9


def test_scale_keeps_the_prior_weight():
    st = OnlineIvectorStats(3, 50.0)
    st.add(np.array([10.0, 2.0, -1.0]), np.diag([4.0, 5.0, 6.0]), 8.0)
    st.scale(0.25)
    np.testing.assert_allclose(st.quadratic, np.eye(3) + 0.25 * np.diag([4.0, 5.0, 6.0]))
    np.testing.assert_allclose(st.linear, [50.0 + 2.5, 0.5, -0.25])
    assert st.count == 2.0


# ---------------------------------------------------------------- with features and a UBM
def small_system(rng):
    dim, context = 4, 1
    transform = np.concatenate([rng.normal(size=(3, dim * 3)), rng.normal(size=(3, 1))], axis=1)
    frames = rng.normal(size=(500, dim))
    pipeline = IvectorFeaturePipeline(transform, context, stats_of(frames))
    ubm = DiagGmm(np.full(4, 0.25), rng.normal(size=(4, 3)), rng.uniform(0.5, 2.0, (4, 3)))
    from paravg.ivector.extractor import IvectorExtractor

    return pipeline, ubm, IvectorExtractor.from_ubm(ubm, 2, rng)


def test_extract_speaker_carries_state_and_resets_per_speaker():
    rng = np.random.default_rng(1)
    pipeline, ubm, ex = small_system(rng)
    utts = [(f"u{k}", rng.normal(size=(37 + k, 4)).astype(np.float32)) for k in range(3)]
    opts = OnlineIvectorOptions()
    together = dict(extract_speaker(ex, ubm, pipeline, utts, opts))
    alone = dict(extract_speaker(ex, ubm, pipeline, utts[1:2], opts))
    assert [r.ivectors.shape for r in together.values()] == [(4, 2), (4, 2), (4, 2)]
    np.testing.assert_array_equal(
        together["u0"].ivectors,
        next(iter(dict(extract_speaker(ex, ubm, pipeline, utts[:1], opts)).values())).ivectors,
    )
    assert not np.allclose(together["u1"].raw, alone["u1"].raw)


def test_extract_speaker_rejects_wrong_feature_dimension():
    rng = np.random.default_rng(1)
    pipeline, ubm, ex = small_system(rng)
    with pytest.raises(ValueError, match="bad: features have shape"):
        list(extract_speaker(ex, ubm, pipeline, [("bad", np.zeros((20, 5)))]))
