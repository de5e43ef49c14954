"""The i-vector model and the posterior of w against Kaldi (IvectorExtractor)."""

import numpy as np
import pytest
from ivector_golden import UTTS, extractor_from

from paravg.errors import DataError
from paravg.ivector.extractor import IvectorExtractor, UtteranceStats
from paravg.ivector.ubm import DiagGmm


def test_derived_variables_match_kaldi(golden_model):
    ex = extractor_from(golden_model)
    np.testing.assert_allclose(ex.U, golden_model["model_U"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ex.Sigma_inv_M, golden_model["model_Sigma_inv_M"], rtol=1e-9)
    np.testing.assert_allclose(ex.gconsts, golden_model["model_gconsts"], rtol=1e-9)


@pytest.mark.parametrize("u", UTTS)
def test_offline_ivector_distribution_matches_kaldi(golden_model, gmm_data, u):
    g = golden_model
    ex = extractor_from(g)
    stats = UtteranceStats.from_posteriors(gmm_data[f"feats{u}"], g[f"utt{u}_post_scaled"], 8)
    np.testing.assert_allclose(stats.gamma, g[f"utt{u}_uttstats_gamma"], rtol=1e-10)
    np.testing.assert_allclose(stats.X, g[f"utt{u}_uttstats_X"], rtol=1e-10, atol=1e-12)
    mean, var = ex.ivector_distribution(stats)
    np.testing.assert_allclose(mean, g[f"utt{u}_offline_mean"], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(var, g[f"utt{u}_offline_var"], rtol=1e-9, atol=1e-9)
    ivector = mean.copy()
    ivector[0] -= ex.prior_offset
    np.testing.assert_allclose(ivector, g[f"utt{u}_offline_ivector"], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("u", UTTS)
def test_auxiliary_functions_match_kaldi(golden_model, gmm_data, u):
    g = golden_model
    ex = extractor_from(g)
    stats = UtteranceStats.from_posteriors(gmm_data[f"feats{u}"], g[f"utt{u}_post_scaled"], 8)
    mean, var = ex.ivector_distribution(stats)
    assert ex.auxf(stats, mean, var) == pytest.approx(g[f"utt{u}_offline_auxf"], rel=1e-10)
    assert ex.auxf(stats, mean) == pytest.approx(g[f"utt{u}_offline_auxf_point"], rel=1e-10)
    assert ex.prior_auxf(mean, var) == pytest.approx(g[f"utt{u}_offline_prior_auxf"], rel=1e-10)
    assert ex.acoustic_auxf(stats, mean, var) == pytest.approx(
        g[f"utt{u}_offline_acoustic_auxf"], rel=1e-10
    )


def test_second_order_stats_are_posterior_weighted_scatter(gmm_data):
    x = gmm_data["feats0"].astype(np.float64)
    post = gmm_data["utt0_post_unscaled"].astype(np.float64)
    stats = UtteranceStats.from_posteriors(x, post, 8, second_order=True)
    expected = np.einsum("ti,td,te->ide", post, x, x)
    np.testing.assert_allclose(stats.S, expected, rtol=1e-12, atol=1e-10)


def test_init_from_ubm_reproduces_ubm_means_at_default_ivector():
    rng = np.random.default_rng(3)
    ubm = DiagGmm(np.full(4, 0.25), rng.normal(size=(4, 6)), rng.uniform(0.5, 2, (4, 6)))
    ex = IvectorExtractor.from_ubm(ubm, 5, np.random.default_rng(0))
    w0 = np.zeros(5)
    w0[0] = ex.prior_offset
    assert ex.prior_offset == 100.0
    np.testing.assert_allclose(ex.M @ w0, ubm.means)
    np.testing.assert_allclose(
        np.linalg.inv(ex.Sigma_inv), np.stack([np.diag(v) for v in ubm.vars])
    )
    np.testing.assert_allclose(ex.w_vec, ubm.weights)
    # seeded: the same seed gives the same projections, another seed others
    again = IvectorExtractor.from_ubm(ubm, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(ex.M, again.M)
    other = IvectorExtractor.from_ubm(ubm, 5, np.random.default_rng(1))
    assert not np.allclose(ex.M[:, :, 1:], other.M[:, :, 1:])


def test_save_load_round_trip(tmp_path, golden_model):
    ex = extractor_from(golden_model)
    ex.save(tmp_path / "e.npz")
    back = IvectorExtractor.load(tmp_path / "e.npz")
    np.testing.assert_array_equal(back.M, ex.M)
    np.testing.assert_array_equal(back.Sigma_inv, ex.Sigma_inv)
    assert back.prior_offset == ex.prior_offset
    np.testing.assert_array_equal(back.U, ex.U)


def test_wrong_file_kind_is_a_clear_error(tmp_path):
    np.savez(tmp_path / "x.npz", a=np.zeros(3))
    with pytest.raises(DataError, match="not an i-vector extractor"):
        IvectorExtractor.load(tmp_path / "x.npz")


def test_feature_dimension_mismatch_is_a_clear_error(golden_model):
    ex = extractor_from(golden_model)
    with pytest.raises(DataError, match="expects dimension 13"):
        ex.check_feats(np.zeros((5, 12)))
