"""Loader: frame selection, context cutting, buffer shuffle, minibatch merging."""

import numpy as np
import pytest
import torch
from egs_synth import LC, RC, D, F

from paravg.egs import all_frame_minibatches, frame_minibatches
from paravg.egs.shuffle import buffer_shuffle_order, reservoir_sample
from paravg.errors import ConfigError


def kaldi_buffer_shuffle(n, buffer_size, slots):
    """Literal nnet3-shuffle-egs buffer loop, given the slot drawn for each incoming eg."""
    buffer, out = [None] * buffer_size, []
    for i in range(n):
        s = slots[i]
        if buffer[s] is not None:
            out.append(buffer[s])
        buffer[s] = i
    return out + [x for x in buffer if x is not None]


@pytest.mark.parametrize(("n", "buffer_size"), [(1, 5), (10, 3), (100, 7), (50, 200), (64, 1)])
def test_buffer_shuffle_matches_the_kaldi_loop(n, buffer_size):
    order = buffer_shuffle_order(n, buffer_size, seed=11)
    slots = np.random.default_rng(11).integers(0, buffer_size, size=n)
    assert order.tolist() == kaldi_buffer_shuffle(n, buffer_size, slots.tolist())


def test_buffer_shuffle_reproducible_and_seed_dependent():
    a = buffer_shuffle_order(1000, 50, seed=3)
    assert np.array_equal(a, buffer_shuffle_order(1000, 50, seed=3))
    assert not np.array_equal(a, buffer_shuffle_order(1000, 50, seed=4))
    assert sorted(a.tolist()) == list(range(1000))
    assert np.array_equal(np.sort(buffer_shuffle_order(10, 0, 1)), np.arange(10))  # 0 = full


@pytest.mark.parametrize("frame", [0, 3, 7])
def test_frame_selection_returns_window_of_frame_k_and_its_label(archive, frame):
    lc, rc = 2, 1  # model context smaller than stored (4, 3)
    batches = list(frame_minibatches(archive, frame, lc, rc, 5, 4, seed=1))
    for mb in batches:
        assert mb.feats.dtype == torch.float32 and mb.feats.shape == (5, lc + 1 + rc, D)
        assert mb.labels.dtype == torch.int64 and mb.labels.shape == (5,)
        eg = mb.feats[:, 0, 0].long()
        assert torch.equal(
            mb.feats[:, :, 1], torch.arange(-lc, rc + 1).float().expand(5, -1) + frame
        )
        assert torch.equal(mb.feats[:, :, 0], eg[:, None].float().expand(-1, lc + 1 + rc))
        assert torch.equal(mb.labels, eg * 100 + frame)
        assert torch.allclose(mb.weights, torch.full((5,), 0.25 * (1 + frame)))
        assert torch.equal(mb.ivectors[:, 0].long(), eg)


def test_every_eg_once_per_pass_and_partial_minibatch_discarded(archive):
    batches = list(frame_minibatches(archive, 2, LC, RC, 5, 10, seed=7))
    assert len(batches) == 37 // 5
    seen = torch.cat([mb.feats[:, 0, 0] for mb in batches]).long().tolist()
    assert len(seen) == 35 and len(set(seen)) == 35
    order = buffer_shuffle_order(37, 10, 7)[:35]
    assert seen == order.tolist()  # emission order = Kaldi's buffer order, then merged


def test_shuffle_differs_between_seeds(archive):
    first = [
        next(frame_minibatches(archive, 0, LC, RC, 8, 16, seed=s)).feats[:, 0, 0] for s in (1, 2)
    ]
    assert not torch.equal(*first)
    again = next(frame_minibatches(archive, 0, LC, RC, 8, 16, seed=1)).feats[:, 0, 0]
    assert torch.equal(first[0], again)


def test_context_wider_than_stored_is_an_error(archive):
    with pytest.raises(ConfigError, match=r"model\.input_splice .* exceeds the stored context"):
        next(frame_minibatches(archive, 0, LC + 1, RC, 4, 4, 0))
    with pytest.raises(ValueError, match="frame 8 out of range"):
        next(frame_minibatches(archive, F, LC, RC, 4, 4, 0))


def test_all_frame_minibatches_cover_everything_in_order_with_last_partial(archive):
    batches = list(all_frame_minibatches(archive, 1, 2, 16))
    assert [mb.size for mb in batches] == [16, 16, 5]
    for mb in batches:
        assert mb.feats.shape[1:] == (1 + F + 2, D) and mb.labels.shape[1] == F
        assert torch.equal(mb.feats[0, :, 1], torch.arange(-1, F + 2).float())
    eg = torch.cat([mb.feats[:, 0, 0] for mb in batches]).long()
    assert eg.tolist() == list(range(37))
    labels = torch.cat([mb.labels for mb in batches])
    assert torch.equal(labels, torch.from_numpy(np.array(archive.labels)).long())
    sub = list(all_frame_minibatches(archive, LC, RC, 4, indices=np.array([5, 1, 30])))
    assert sub[0].feats[:, 0, 0].tolist() == [5, 1, 30]
    assert sub[0].labels[:, 0].tolist() == [500, 100, 3000]


def test_reservoir_sample_is_uniform_and_distinct():
    rng = np.random.default_rng(0)
    assert reservoir_sample(5, 10, rng).tolist() == [0, 1, 2, 3, 4]
    counts = np.zeros(40)
    for _ in range(2000):
        idx = reservoir_sample(40, 10, rng)
        assert len(set(idx.tolist())) == 10
        counts[idx] += 1
    assert counts.min() > 0.8 * 500 and counts.max() < 1.2 * 500  # each kept w.p. 1/4
