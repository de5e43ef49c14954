"""Gaussian objective against kaldi-hmm-gmm's GaussClusterable; acc-tree-stats pooling."""

from __future__ import annotations

import kaldi_hmm_gmm
import numpy as np
import pytest

from paravg.gmm.clusterable import GaussStats, gauss_objf
from paravg.gmm.tree_stats import (
    ABSENT,
    TreeStats,
    accumulate_tree_stats,
    context_windows,
    sum_tree_stats,
)


@pytest.mark.parametrize("var_floor", [0.01, 0.5])
def test_objf_matches_kaldi_gauss_clusterable(var_floor):
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(40, 4)) * [1.0, 0.05, 2.0, 0.3] + [0.0, 1.0, -2.0, 5.0]
    x, x2 = feats.sum(0), (feats * feats).sum(0)
    kaldi = kaldi_hmm_gmm.GaussClusterable(x[:, None], x2[:, None], var_floor, 40.0)
    assert gauss_objf(40.0, x, x2, var_floor) == pytest.approx(kaldi.objf(), rel=1e-6)
    ours = GaussStats.zeros(4, var_floor)
    ours.add_frames(feats)
    assert ours.objf() == pytest.approx(kaldi.objf(), rel=1e-6)
    # one frame: every variance floored
    single = kaldi_hmm_gmm.GaussClusterable(4, var_floor)
    single.add_stats(feats[0], 1.0)
    assert gauss_objf(1.0, feats[0], feats[0] ** 2, var_floor) == pytest.approx(
        single.objf(), rel=1e-6
    )


def test_distance_is_the_merge_loss_and_zero_for_empty():
    rng = np.random.default_rng(1)
    a, b = GaussStats.zeros(2), GaussStats.zeros(2)
    a.add_frames(rng.normal(size=(30, 2)))
    b.add_frames(rng.normal(size=(30, 2)) + 3.0)
    pooled = a.copy()
    pooled.add(b)
    assert a.distance(b) == pytest.approx(a.objf() + b.objf() - pooled.objf())
    assert a.distance(b) > 50  # well-separated means: merging them costs a lot
    assert GaussStats.zeros(2).objf() == 0.0
    assert gauss_objf(np.zeros(3), np.zeros((3, 2)), np.zeros((3, 2))).tolist() == [0, 0, 0]


def test_context_windows_pad_with_zero():
    assert context_windows([5, 6, 7], 3, 1).tolist() == [[0, 5, 6], [5, 6, 7], [6, 7, 0]]
    assert context_windows([5], 1, 0).tolist() == [[5]]


def test_accumulate_pools_frames_per_event_and_drops_context_of_ci_phones():
    contexts = np.array([[0, 5, 6], [0, 5, 6], [5, 6, 7], [5, 6, 7], [1, 9, 2], [3, 9, 4]])
    pdf_classes = np.array([0, 0, 0, 1, 0, 0])
    feats = np.arange(12.0).reshape(6, 2)
    stats = accumulate_tree_stats(contexts, pdf_classes, feats, central_position=1, ci_phones=[9])
    by_event = {tuple(e): i for i, e in enumerate(stats.events.tolist())}
    first = by_event[(0, 5, 6, 0)]
    assert stats.count[first] == 2
    np.testing.assert_allclose(stats.x_stats[first], feats[0] + feats[1])
    np.testing.assert_allclose(stats.x2_stats[first], feats[0] ** 2 + feats[1] ** 2)
    ci = by_event[(ABSENT, 9, ABSENT, 0)]  # both contexts of phone 9 pooled, context dropped
    assert stats.count[ci] == 2
    assert stats.event(ci) == {1: 9, -1: 0}
    assert stats.count.sum() == 6 and len(stats) == 4


def test_sum_tree_stats_adds_and_save_load_round_trips(tmp_path):
    rng = np.random.default_rng(2)
    contexts = rng.integers(1, 4, size=(100, 3))
    pdf = rng.integers(0, 2, size=100)
    feats = rng.normal(size=(100, 3))
    whole = accumulate_tree_stats(contexts, pdf, feats, 1)
    parts = [
        accumulate_tree_stats(contexts[s], pdf[s], feats[s], 1)
        for s in (slice(0, 40), slice(40, 100))
    ]
    summed = sum_tree_stats(parts)
    np.testing.assert_array_equal(summed.events, whole.events)
    np.testing.assert_allclose(summed.x2_stats, whole.x2_stats)
    whole.save(tmp_path / "treeacc.npz")
    back = TreeStats.load(tmp_path / "treeacc.npz")
    np.testing.assert_array_equal(back.events, whole.events)
    np.testing.assert_allclose(back.x_stats, whole.x_stats)
    assert back.central_position == 1 and back.var_floor == whole.var_floor
    with pytest.raises(ValueError, match="frames differ"):
        accumulate_tree_stats(contexts, pdf[:5], feats, 1)
