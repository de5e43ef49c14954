"""Extractor EM (IvectorExtractorStats) against Kaldi, and its properties."""

import numpy as np
import pytest
from ivector_golden import UTTS, extractor_from

from paravg.errors import DataError
from paravg.ivector import extractor_em as em
from paravg.ivector.extractor import IvectorExtractor
from paravg.ivector.synthetic import speaker_utterances
from paravg.ivector.ubm import DiagGmm, UbmStats
from paravg.ivector.ubm import update as ubm_update

OPTS = em.ExtractorUpdateOptions(gaussian_min_count=10)  # as the golden run


def golden_stats(ex, gmm_data):
    stats = em.IvectorExtractorStats.zeros(ex)
    for u in UTTS:
        stats.accumulate(ex, gmm_data[f"feats{u}"], gmm_data[f"utt{u}_post_unscaled"])
    return stats


@pytest.fixture(scope="module", params=["em1", "em2"])
def em_case(request, em_golden, gmm_data):
    k = request.param
    start = extractor_from(em_golden, "em1_updated_") if k == "em2" else None
    if start is None:
        from ivector_golden import load_golden

        start = extractor_from(load_golden("ivector_init_model.npz"))
    return k, start, golden_stats(start, gmm_data)


def test_em_stats_match_kaldi(em_case, em_golden):
    k, _, stats = em_case
    for name in ("gamma", "Y", "R", "S", "ivector_sum"):
        np.testing.assert_allclose(getattr(stats, name), em_golden[f"{k}_stats_{name}"], rtol=1e-10)
    np.testing.assert_allclose(
        stats.ivector_scatter, em_golden[f"{k}_stats_ivector_scatter"], rtol=1e-10, atol=1e-11
    )
    assert stats.num_ivectors == em_golden[f"{k}_stats_num_ivectors"]
    assert stats.tot_auxf == pytest.approx(em_golden[f"{k}_stats_tot_auxf"], rel=1e-10)


def test_update_steps_match_kaldi(em_case, em_golden):
    k, start, stats = em_case
    g = lambda name: em_golden[f"{k}_{name}"]  # noqa: E731
    ex = start.copy()
    impr_proj = em.update_projections(stats, ex, OPTS)
    np.testing.assert_allclose(ex.M, g("step_after_proj_M"), rtol=1e-9, atol=1e-12)
    assert impr_proj == pytest.approx(g("step_impr_proj"), rel=1e-8, abs=1e-12)
    impr_var = em.update_variances(stats, ex, OPTS)
    np.testing.assert_allclose(ex.Sigma_inv, g("step_after_var_Sigma_inv"), rtol=1e-9)
    np.testing.assert_allclose(ex.M, g("step_after_var_M"), rtol=1e-9, atol=1e-12)
    assert impr_var == pytest.approx(g("step_impr_var"), rel=1e-8, abs=1e-12)


def test_prior_update_invariants_match_kaldi(em_case, em_golden):
    """After UpdatePrior only rotation-invariant quantities are comparable (README)."""
    k, start, stats = em_case
    g = lambda name: em_golden[f"{k}_{name}"]  # noqa: E731
    new, info = em.update(start, stats, OPTS)
    M_var = g("step_after_var_M")
    mu = stats.ivector_sum / stats.num_ivectors
    C = stats.ivector_scatter / stats.num_ivectors - np.outer(mu, mu)
    offset = np.sqrt(mu @ np.linalg.solve(C, mu))
    assert new.prior_offset == pytest.approx(g("updated_prior_offset"), rel=1e-9)
    assert new.prior_offset == pytest.approx(offset, rel=1e-9)
    np.testing.assert_allclose(new.M[:, :, 0], g("updated_M")[:, :, 0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(new.M[:, :, 0], M_var @ mu / offset, rtol=1e-9, atol=1e-12)
    MMt = np.einsum("ids,jes->ijde", new.M, new.M)
    expected = np.einsum("ids,st,jet->ijde", M_var, C, M_var)
    np.testing.assert_allclose(MMt, expected, rtol=1e-9, atol=1e-10)
    kaldi = np.einsum("ids,jes->ijde", g("updated_M"), g("updated_M"))
    np.testing.assert_allclose(MMt, kaldi, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(new.Sigma_inv, g("updated_Sigma_inv"), rtol=1e-9)
    assert info["impr_prior"] == pytest.approx(g("step_impr_prior"), rel=1e-8, abs=1e-12)
    assert info["impr_total"] == pytest.approx(g("update_impr"), rel=1e-8, abs=1e-12)


def test_prior_transform_maps_mean_to_offset_and_keeps_predictions(em_case):
    _, start, stats = em_case
    ex = start.copy()
    em.update_projections(stats, ex, OPTS)
    em.update_variances(stats, ex, OPTS)
    ex.compute_derived_vars()
    V, mu, _ = em.prior_transform(stats, ex)
    new, _ = em.update(start, stats, OPTS)
    e0 = np.zeros_like(mu)
    e0[0] = new.prior_offset
    np.testing.assert_allclose(V @ mu, e0, atol=1e-9 * new.prior_offset)
    # The model predicts the same means for transformed i-vectors: M' (V w) = M w.
    np.testing.assert_allclose(new.M @ V, ex.M, rtol=1e-9, atol=1e-10)


def test_prior_diagonalisation_orders_dimensions(em_case):
    _, start, stats = em_case
    new, _ = em.update(start, stats, OPTS)
    Uavg = np.tensordot(new.w_vec, new.U, axes=1)[1:, 1:]
    off = Uavg - np.diag(np.diag(Uavg))
    assert np.abs(off).max() < 1e-9 * np.abs(Uavg).max()
    assert np.all(np.diff(np.diag(Uavg)) <= 1e-12)


# ---------------------------------------------------------------- synthetic EM
@pytest.fixture(scope="module")
def synthetic_setup():
    rng = np.random.default_rng(7)
    spk = speaker_utterances(rng, 12, 3, (80, 160), dim=6, num_components=4, rank=2)
    utts = [x.astype(np.float64) for u in spk.values() for _, x in u]
    frames = np.concatenate(utts)
    gmm = DiagGmm(
        np.full(4, 0.25),
        frames[rng.choice(len(frames), 4, replace=False)],
        np.tile(frames.var(axis=0), (4, 1)),
    )
    for _ in range(10):
        stats = UbmStats.zeros(4, 6)
        stats.accumulate(gmm, frames)
        gmm, _ = ubm_update(gmm, stats)
    posts = []
    for x in utts:
        ll = gmm.log_likelihoods(x)
        p = np.exp(ll - ll.max(axis=1, keepdims=True))
        posts.append(p / p.sum(axis=1, keepdims=True))
    return gmm, utts, posts


def accumulate_all(ex, utts, posts):
    stats = em.IvectorExtractorStats.zeros(ex)
    for x, p in zip(utts, posts, strict=True):
        stats.accumulate(ex, x, p)
    return stats


def test_em_auxf_never_decreases(synthetic_setup):
    gmm, utts, posts = synthetic_setup
    ex = IvectorExtractor.from_ubm(gmm, 3, np.random.default_rng(0))
    auxfs = []
    for _ in range(6):
        stats = accumulate_all(ex, utts, posts)
        auxfs.append(stats.tot_auxf)
        ex, info = em.update(ex, stats, em.ExtractorUpdateOptions(gaussian_min_count=1))
        assert info["impr_projections"] >= 0 and info["impr_variances"] >= -1e-9
    assert np.all(np.diff(auxfs) >= -1e-6 * np.abs(auxfs).max()), auxfs
    assert auxfs[-1] > auxfs[0]


def test_stats_of_k_jobs_sum_to_one_job(synthetic_setup, tmp_path):
    gmm, utts, posts = synthetic_setup
    ex = IvectorExtractor.from_ubm(gmm, 3, np.random.default_rng(0))
    whole = accumulate_all(ex, utts, posts)
    parts = [accumulate_all(ex, utts[j::3], posts[j::3]) for j in range(3)]
    for j, p in enumerate(parts):
        p.save(tmp_path / f"acc.{j}.npz")
    total = em.sum_stats(
        [em.IvectorExtractorStats.load(tmp_path / f"acc.{j}.npz") for j in range(3)]
    )
    for name in ("gamma", "Y", "R", "S", "ivector_sum", "ivector_scatter"):
        np.testing.assert_allclose(
            getattr(total, name), getattr(whole, name), rtol=1e-12, atol=1e-12
        )
    assert total.num_ivectors == whole.num_ivectors == len(utts)
    assert total.tot_auxf == pytest.approx(whole.tot_auxf, rel=1e-12)
    a, _ = em.update(ex, whole)
    b, _ = em.update(ex, total)
    np.testing.assert_allclose(a.M, b.M, rtol=1e-9, atol=1e-12)


def test_low_count_gaussians_keep_their_parameters(synthetic_setup):
    gmm, utts, posts = synthetic_setup
    ex = IvectorExtractor.from_ubm(gmm, 3, np.random.default_rng(0))
    stats = accumulate_all(ex, utts, posts)
    low = int(np.argmin(stats.gamma))
    opts = em.ExtractorUpdateOptions(gaussian_min_count=float(stats.gamma[low]) + 1e-9)
    new = ex.copy()
    em.update_projections(stats, new, opts)
    em.update_variances(stats, new, opts)
    np.testing.assert_array_equal(new.M[low], ex.M[low])
    np.testing.assert_array_equal(new.Sigma_inv[low], ex.Sigma_inv[low])
    assert not np.allclose(new.M[low - 1], ex.M[low - 1])


def test_variance_floor_holds():
    A = np.diag([1e-6, 2.0, 3.0])
    floor = np.eye(3) * 0.5
    B, n = em.floor_psd(A, floor)
    assert n == 1
    assert np.linalg.eigvalsh(B - floor).min() >= -1e-12
    np.testing.assert_allclose(B, np.diag([0.5, 2.0, 3.0]))


def test_mismatched_stats_are_a_clear_error(em_golden):
    ex = extractor_from(em_golden, "em1_updated_")
    stats = em.IvectorExtractorStats.zeros(ex)
    stats.Y = stats.Y[:, :, :3]
    with pytest.raises(DataError, match="extractor stats have"):
        em.update(ex, stats)


def test_prior_update_leaves_training_ivectors_zero_mean_unit_covariance(synthetic_setup):
    """Exactly for the statistics it was estimated from; approximately when re-extracted."""
    gmm, utts, posts = synthetic_setup
    ex = IvectorExtractor.from_ubm(gmm, 3, np.random.default_rng(0))
    opts = em.ExtractorUpdateOptions(gaussian_min_count=1)
    for _ in range(3):
        ex, _ = em.update(ex, accumulate_all(ex, utts, posts), opts)
    stats = accumulate_all(ex, utts, posts)
    after = ex.copy()
    em.update_projections(stats, after, opts)
    em.update_variances(stats, after, opts)
    after.compute_derived_vars()
    V, mu, C = em.prior_transform(stats, after)
    new, _ = em.update(ex, stats, opts)
    np.testing.assert_allclose(V @ C @ V.T, np.eye(3), atol=1e-9)
    np.testing.assert_allclose(V @ mu, [new.prior_offset, 0, 0], atol=1e-9 * new.prior_offset)
    # Re-extracted with the updated model: close to N(0, I) once p' is subtracted.
    again = accumulate_all(new, utts, posts)
    m = again.ivector_sum / again.num_ivectors
    cov = again.ivector_scatter / again.num_ivectors - np.outer(m, m)
    m[0] -= new.prior_offset
    assert np.abs(m).max() < 0.1
    np.testing.assert_allclose(cov, np.eye(3), atol=0.15)
