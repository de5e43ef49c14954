"""UtteranceSplitter: Kaldi's chunk counts, placements and output weights (F = 8)."""

import numpy as np
import pytest

from paravg.egs.chunking import (
    UtteranceSplitter,
    distribute_proportional,
    distribute_uniform,
    split_cost,
    utterance_rng,
)

F = 8
SPLITTER = UtteranceSplitter(F)


def chunks_for(length, seed=0, utt="u", lc=0):
    return SPLITTER.split(length, utterance_rng(seed, utt), lc)


def test_costs_penalise_gaps_double_and_forbid_chunks_longer_than_utterance():
    assert split_cost(16, 15, 8) == 1  # overlap of 1 frame
    assert split_cost(8, 9, 8) == 2  # gap of 1 frame costs 2
    assert split_cost(8, 7, 8) == float("inf")


# length -> allowed numbers of chunks, worked by hand from the cost rule:
# u=11: 1 chunk costs 2*3=6, 2 chunks cost 5 -> both within 1.9999 of the best.
@pytest.mark.parametrize(
    ("length", "allowed"),
    [
        (7, ()),
        (8, (1,)),
        (9, (1,)),
        (11, (1, 2)),
        (15, (2,)),
        (16, (2,)),
        (17, (2,)),
        (19, (2, 3)),
        (24, (3,)),
    ],
)
def test_table_of_allowed_splits(length, allowed):
    assert SPLITTER.splits_for_length[length] == allowed


@pytest.mark.parametrize(
    ("length", "num_chunks"),
    [(7, 0), (8, 1), (9, 1), (15, 2), (16, 2), (17, 2), (24, 3), (25, 3), (100, 13)],
)
def test_number_of_chunks(length, num_chunks):
    for seed in range(20):
        assert chunks_for(length, seed).num_chunks == num_chunks


def test_tied_lengths_draw_both_splits():
    counts = {chunks_for(11, seed).num_chunks for seed in range(200)}
    assert counts == {1, 2}


def test_long_utterance_subtracts_chunks_until_tabulated():
    # 100 -> 20 after ten subtractions of 8; 20 frames take 3 chunks -> 13 chunks, overlap 4
    c = chunks_for(100)
    assert c.num_chunks == 13
    ends = c.first_frames + F
    overlaps = ends[:-1] - c.first_frames[1:]
    assert overlaps.sum() == 4
    assert c.first_frames[0] == 0 and ends[-1] == 100  # no overlap at the edges
    # equal chunks: Kaldi gives the first (4 mod 12) boundaries one frame each
    assert overlaps.tolist() == [1, 1, 1, 1] + [0] * 8


def test_overlap_of_15_frames_is_between_the_two_chunks_with_half_weights():
    c = chunks_for(15)
    assert c.first_frames.tolist() == [0, 7]
    assert c.weights[0].tolist() == [1.0] * 7 + [0.5]
    assert c.weights[1].tolist() == [0.5] + [1.0] * 7


@pytest.mark.parametrize("length", [9, 17, 25])
def test_gaps_are_spread_over_chunks_plus_one_slots_at_random(length):
    starts = set()
    for seed in range(100):
        c = chunks_for(length, seed)
        assert np.all(c.first_frames[1:] - c.first_frames[:-1] >= F)  # no overlap
        assert c.first_frames[0] >= 0 and c.first_frames[-1] + F <= length
        assert np.all(c.weights == 1.0)
        starts.add(tuple(c.first_frames.tolist()))
    gap = length - F * len(next(iter(starts)))
    assert gap == 1
    # one frame of gap goes to one of #chunks + 1 slots: every placement occurs
    assert len(starts) == len(next(iter(starts))) + 1


@pytest.mark.parametrize("length", [8, 9, 15, 16, 17, 24, 25, 37, 100, 333])
def test_weights_sum_to_one_per_covered_frame(length):
    c = chunks_for(length, seed=3)
    per_frame = np.zeros(length)
    covered = np.zeros(length, dtype=bool)
    for first, w in zip(c.first_frames, c.weights, strict=True):
        per_frame[first : first + F] += w
        covered[first : first + F] = True
    assert np.allclose(per_frame[covered], 1.0)
    assert np.all(per_frame[~covered] == 0)
    assert c.weights.sum() == pytest.approx(covered.sum())


def test_same_utterance_same_chunks_and_different_utterances_differ():
    a = chunks_for(333, 0, "spk1-a", lc=4)
    b = chunks_for(333, 0, "spk1-a", lc=4)
    assert np.array_equal(a.first_frames, b.first_frames)
    assert np.array_equal(a.ivector_frames, b.ivector_frames)
    others = [chunks_for(333, 0, f"spk1-{k}", lc=4).ivector_frames for k in range(5)]
    assert any(not np.array_equal(a.ivector_frames, o) for o in others)
    assert not np.array_equal(a.ivector_frames, chunks_for(333, 1, "spk1-a", lc=4).ivector_frames)


def test_ivector_frame_is_drawn_from_chunk_start_minus_context_over_utterance_length():
    lc, T = 4, 50
    lows, highs = [], []
    for seed in range(300):
        c = chunks_for(T, seed, lc=lc)
        start = c.first_frames - lc
        assert np.all(c.ivector_frames >= start)
        assert np.all(c.ivector_frames <= start + T - 1)
        lows.append((c.ivector_frames == start).any())
        highs.append((c.ivector_frames == start + T - 1).any())
    assert any(lows) and any(highs)  # both ends of the range are reachable


def test_distribute_helpers():
    rng = np.random.default_rng(0)
    out = distribute_uniform(7, 3, rng)
    assert sorted(out.tolist()) == [2, 2, 3]
    assert distribute_proportional(5, np.array([8, 8, 8])).tolist() == [2, 2, 1]
    assert distribute_proportional(6, np.array([2, 4])).tolist() == [2, 4]
    assert distribute_proportional(4, np.array([1, 2])).tolist() == [1, 3]
