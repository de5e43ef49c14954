"""Diagonal UBM: EM, Gaussian selection, splitting, init, accumulator algebra."""

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.ivector import ubm


@pytest.fixture(scope="module")
def frames():
    rng = np.random.default_rng(0)
    centres = rng.normal(0, 4, (6, 3))
    z = rng.integers(0, 6, 3000)
    return centres[z] + rng.normal(size=(3000, 3)) * rng.uniform(0.5, 1.5, 3)


def em_pass(gmm, x, gselect=None, opts=None):
    opts = opts or ubm.UbmUpdateOptions()
    stats = ubm.UbmStats.zeros(gmm.num_gauss, gmm.dim)
    stats.accumulate(gmm, x, gselect)
    return ubm.update(gmm, stats, opts), stats


def test_log_likelihoods_are_gaussian_densities():
    rng = np.random.default_rng(1)
    gmm = ubm.DiagGmm(np.array([0.3, 0.7]), rng.normal(size=(2, 3)), rng.uniform(0.5, 2, (2, 3)))
    x = rng.normal(size=(5, 3))
    ll = gmm.log_likelihoods(x)
    for i in range(2):
        d = x - gmm.means[i]
        expected = np.log(gmm.weights[i]) - 0.5 * (
            3 * np.log(2 * np.pi) + np.log(gmm.vars[i]).sum() + (d * d / gmm.vars[i]).sum(axis=1)
        )
        np.testing.assert_allclose(ll[:, i], expected)


def test_em_likelihood_never_decreases(frames):
    rng = np.random.default_rng(2)
    gmm = ubm.init_from_frames(frames, 8, rng)
    likes = []
    for _ in range(8):
        (gmm, info), _ = em_pass(gmm, frames)
        likes.append(info["loglike_per_frame"])
        assert info["objf_change_per_frame"] >= -1e-10
    assert np.all(np.diff(likes) >= -1e-10)
    assert likes[-1] > likes[0]


def test_em_with_gselect_never_decreases_the_auxf(frames):
    rng = np.random.default_rng(3)
    gmm, _ = ubm.train_in_memory(frames, 12, 6, rng)
    gselect = gmm.gaussian_selection(frames, 4)
    assert gselect.shape == (3000, 4)
    ll = gmm.log_likelihoods(frames)
    np.testing.assert_array_equal(gselect[:, 0], ll.argmax(axis=1))
    for _ in range(3):
        (gmm, info), _ = em_pass(
            gmm, frames, gselect, ubm.UbmUpdateOptions(remove_low_count_gaussians=False)
        )
        assert info["objf_change_per_frame"] >= -1e-10


def test_stats_of_k_jobs_sum_to_one_job(frames, tmp_path):
    gmm = ubm.init_from_frames(frames, 5, np.random.default_rng(4))
    gs = gmm.gaussian_selection(frames, 3)
    whole = ubm.UbmStats.zeros(5, 3)
    whole.accumulate(gmm, frames, gs)
    paths = []
    for j, idx in enumerate(np.array_split(np.arange(3000), 3)):
        part = ubm.UbmStats.zeros(5, 3)
        part.accumulate(gmm, frames[idx], gs[idx])
        part.save(tmp_path / f"acc.{j}.npz")
        paths.append(tmp_path / f"acc.{j}.npz")
    total = ubm.sum_stats([ubm.UbmStats.load(p) for p in paths])
    np.testing.assert_allclose(total.occupancy, whole.occupancy, rtol=1e-12)
    np.testing.assert_allclose(total.mean_acc, whole.mean_acc, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(total.var_acc, whole.var_acc, rtol=1e-12)
    assert total.tot_loglike == pytest.approx(whole.tot_loglike, rel=1e-12)
    assert total.num_frames == 3000
    a, _ = ubm.update(gmm, whole)
    b, _ = ubm.update(gmm, total)
    np.testing.assert_allclose(a.means, b.means, rtol=1e-10)


def test_low_count_gaussians_removed_only_when_asked(frames):
    gmm = ubm.init_from_frames(frames, 4, np.random.default_rng(5))
    gmm.means[3] = 1e3  # far from every frame: no occupancy
    gmm.compute_gconsts()
    (kept, info), _ = em_pass(
        gmm, frames, opts=ubm.UbmUpdateOptions(remove_low_count_gaussians=False)
    )
    assert kept.num_gauss == 4 and info["removed_gaussians"] == 0
    np.testing.assert_array_equal(kept.means[3], gmm.means[3])
    assert kept.weights[3] == pytest.approx(1e-4)
    (removed, info), _ = em_pass(gmm, frames)
    assert removed.num_gauss == 3 and info["removed_gaussians"] == 1
    assert removed.weights.sum() == pytest.approx(1.0)


def test_variance_floor(frames):
    gmm = ubm.init_from_frames(frames, 2, np.random.default_rng(6))
    x = np.tile(frames[:1], (200, 1))  # zero variance data
    (new, info), _ = em_pass(gmm, x, opts=ubm.UbmUpdateOptions(remove_low_count_gaussians=False))
    assert new.vars.min() >= 1e-3
    assert info["floored_variances"] > 0


def test_split_doubles_heaviest_and_perturbs_means():
    gmm = ubm.DiagGmm(np.array([0.2, 0.8]), np.zeros((2, 2)), np.full((2, 2), 4.0))
    gmm.split(3, 0.1, np.random.default_rng(0))
    assert gmm.num_gauss == 3
    np.testing.assert_allclose(gmm.weights, [0.2, 0.4, 0.4])
    np.testing.assert_allclose(gmm.means[1], -gmm.means[2])
    assert 0 < np.abs(gmm.means[2]).max() < 1.0


def test_train_in_memory_reaches_num_gauss_halfway(frames):
    gmm, history = ubm.train_in_memory(frames, 16, 10, np.random.default_rng(7))
    assert gmm.num_gauss == 16
    assert [h["num_gauss"] for h in history][:3] == [8, 9, 10]
    assert history[-1]["num_gauss"] == 16
    # seeded: same seed -> same model
    again, _ = ubm.train_in_memory(frames, 16, 10, np.random.default_rng(7))
    np.testing.assert_array_equal(gmm.means, again.means)


def test_init_needs_ten_frames_per_gaussian(frames):
    with pytest.raises(DataError, match="too few frames"):
        ubm.init_from_frames(frames[:50], 8, np.random.default_rng(0))


def test_reservoir_keeps_a_uniform_sample():
    rng = np.random.default_rng(8)
    res = ubm.Reservoir(1000, rng)
    data = np.arange(20000, dtype=float)[:, None]
    for chunk in np.array_split(data, 37):
        res.add(chunk)
    sample = res.sample()[:, 0]
    assert sample.shape == (1000,) and len(np.unique(sample)) == 1000
    assert res.num_seen == 20000
    # roughly uniform over the stream: each quarter holds about a quarter
    counts = np.histogram(sample, bins=4, range=(0, 20000))[0]
    assert np.all(np.abs(counts - 250) < 60), counts
    small = ubm.Reservoir(100, rng)
    small.add(data[:30])
    np.testing.assert_array_equal(small.sample(), data[:30])


def test_save_load_and_dimension_errors(tmp_path, frames):
    gmm = ubm.init_from_frames(frames, 3, np.random.default_rng(9))
    gmm.save(tmp_path / "u.npz")
    back = ubm.DiagGmm.load(tmp_path / "u.npz")
    np.testing.assert_array_equal(back.means, gmm.means)
    with pytest.raises(DataError, match="expects dimension 3"):
        gmm.log_likelihoods(np.zeros((4, 5)))
    with pytest.raises(DataError, match="not a diagonal GMM"):
        np.savez(tmp_path / "x.npz", a=1)
        ubm.DiagGmm.load(tmp_path / "x.npz")


def test_blocked_e_step_bounds_memory_and_keeps_the_statistics(frames):
    """ubm_init's E-step in blocks: temporaries within max_bytes, the same statistics
    (bit-identical when one block holds every frame, to rounding with several)."""
    import tracemalloc

    gmm = ubm.init_from_frames(frames, 16, np.random.default_rng(3))
    whole = ubm.UbmStats.zeros(16, 3)
    tracemalloc.start()
    whole.accumulate(gmm, frames)
    whole_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    max_bytes = 100 * 8 * (3 * 16 + 2 * 3)
    assert ubm.block_frames(16, 3, max_bytes) == 100
    blocked = ubm.UbmStats.zeros(16, 3)
    tracemalloc.start()
    loglike = blocked.accumulate_blocks(gmm, frames, max_bytes)
    blocked_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert blocked_peak < 1.5 * max_bytes < whole_peak / 5
    assert loglike == pytest.approx(whole.tot_loglike, rel=1e-13)
    assert blocked.num_frames == whole.num_frames == 3000
    for name in ("occupancy", "mean_acc", "var_acc"):
        np.testing.assert_allclose(getattr(blocked, name), getattr(whole, name), rtol=1e-12)
    one = ubm.UbmStats.zeros(16, 3)
    one.accumulate_blocks(gmm, frames, 3000 * 8 * (3 * 16 + 2 * 3))
    for name in ("occupancy", "mean_acc", "var_acc"):
        np.testing.assert_array_equal(getattr(one, name), getattr(whole, name))
