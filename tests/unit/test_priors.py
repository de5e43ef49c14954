"""Priors on Kaldi's sample: 10 jobs x prior_subset_size egs (paravg.priors)."""

import numpy as np
import pytest
import torch

from paravg.egs.archive import ArchiveMeta, EgsBatch, write_archive
from paravg.priors import average_posterior, prior_job_archives

F, LC, RC, D, N = 4, 1, 1, 2, 6  # frames per eg, stored context, feat dim, egs per archive


class OneHotByEg:
    """A stand-in model whose posterior is one-hot on the eg's identity (feature 0 holds
    archive * N + eg), so the "prior" is a histogram of the frames that were counted."""

    left_context, right_context, ivector_dim = 1, 1, 0

    def __init__(self, num_archives):
        self.num_targets = num_archives * N

    def __call__(self, feats, ivectors=None):
        ids = feats[:, 0, 0].long()
        out = torch.full((feats.shape[0], F, self.num_targets), -1e30)
        out[torch.arange(len(ids)), :, ids] = 0.0
        return out


def _archives(tmp_path, num_archives):
    prefixes = []
    for a in range(num_archives):
        meta = ArchiveMeta(N, F, LC, RC, D, 0, "float32")
        feats = np.zeros((N, meta.window, D), np.float32)
        feats[:, :, 0] = (a * N + np.arange(N))[:, None]
        labels = np.zeros((N, F), np.int32)
        weights = np.ones((N, F), np.float32)
        batch = EgsBatch(feats, labels, weights, None, [f"u{a}-{i}" for i in range(N)])
        write_archive(tmp_path / f"egs.{a}", batch, meta)
        prefixes.append(tmp_path / f"egs.{a}")
    return prefixes


def _egs_counted(prior, num_archives):
    return prior.numpy().reshape(num_archives, N)


def test_job_archives_follow_kaldi():
    assert prior_job_archives(5) == [0] * 10  # 10 > num_archives: every job reads egs.1
    assert prior_job_archives(10) == list(range(10))
    assert prior_job_archives(40) == list(range(10))
    with pytest.raises(ValueError):
        prior_job_archives(0)


def test_ten_archives_each_give_a_subset_of_prior_subset_size(tmp_path):
    archives = _archives(tmp_path, 10)
    model = OneHotByEg(10)
    prior, summary = average_posterior(model, archives, subset_size=4, srand=0)
    counts = _egs_counted(prior, 10) * summary["prior_frames"] / F  # egs counted
    np.testing.assert_allclose(counts.sum(1), np.full(10, 4.0))
    assert set(np.round(counts.ravel(), 6)) <= {0.0, 1.0}  # an eg at most once per job
    assert summary["prior_egs"] == 40 and summary["prior_frames"] == 40 * F


def test_few_archives_count_the_first_ten_times(tmp_path):
    archives = _archives(tmp_path, 3)
    model = OneHotByEg(3)
    # subset >= archive size: every job takes all of egs.1 (10 x 6 egs)
    prior, summary = average_posterior(model, archives, subset_size=50, srand=0)
    counts = _egs_counted(prior, 3) * summary["prior_frames"] / F
    np.testing.assert_allclose(counts, [[10.0] * N, [0.0] * N, [0.0] * N])
    assert summary["prior_egs"] == 60 and summary["prior_archives"] == [0]
    # subset < archive size: 10 different reservoir subsets of egs.1, seeded from srand
    prior, summary = average_posterior(model, archives, subset_size=4, srand=0)
    counts = _egs_counted(prior, 3) * summary["prior_frames"] / F
    assert counts[1:].sum() == 0 and counts[0].sum() == pytest.approx(40.0)
    assert counts[0].max() < 10  # the jobs did not all keep the same egs
    other, _ = average_posterior(model, archives, subset_size=4, srand=1)
    again, _ = average_posterior(model, archives, subset_size=4, srand=0)
    assert torch.equal(prior, again) and not torch.equal(prior, other)
