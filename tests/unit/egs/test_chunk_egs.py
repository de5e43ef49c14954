"""Chunk egs (Kaldi's RNN egs, ``train_rnn.py --egs.chunk-width=40,30,20``): the
multi-width UtteranceSplitter, the initial / final contexts, the archives and their
readers (one structure per minibatch)."""

import json

import numpy as np
import pytest
from egs_synth import build_egs

from paravg.egs import EgsArchive, all_chunk_minibatches, chunk_minibatches
from paravg.egs.chunking import UtteranceSplitter, utterance_rng
from paravg.egs.plan import read_uttlist
from paravg.errors import ConfigError

RNN = UtteranceSplitter(40, (30, 20))


def test_candidates_are_up_to_two_alternatives_and_principals_as_kaldi_sorts_them():
    cands = RNN.candidate_splits
    assert RNN.max_tabulated_length == 2 * 40 + 40
    assert (20, 30) in cands and (30, 20) in cands  # both orders, as Kaldi's set
    assert (20, 30, 40) in cands and (40, 40, 40, 40) in cands
    assert (40, 20) not in cands and (20, 40) in cands  # sorted once a P is added
    assert (30, 20, 40) not in cands  # ... but the pair alone is not: (30, 20) is one
    assert (20, 20, 20) not in cands  # at most two alternatives
    assert all(sum(c) <= 160 for c in cands) and (40,) * 5 not in cands
    assert list(cands) == sorted(cands)


# worked by hand from the cost rule (overlap d − u, gap 2 (u − d), ∞ if a chunk > u),
# keeping splits within 1.9999 of the best:
# u=35: (20,20) costs 5, (30,) 10, (20,30) 15 -> only (20,20)
# u=45: (20,30) and (30,20) cost 5, (40,) and (20,20) 10 -> the two orders
# u=50: (20,30), (30,20) cost 0; (30,30) and (20,40) 10
# u=80: (40,40) and (20,20,40) cost 0 (both total 80); (30,40) 20
@pytest.mark.parametrize(
    ("length", "allowed"),
    [
        (19, ()),
        (20, ((20,),)),
        (25, ((20,),)),
        (35, ((20, 20),)),
        (45, ((20, 30), (30, 20))),
        (50, ((20, 30), (30, 20))),
        (80, ((20, 20, 40), (40, 40))),
    ],
)
def test_allowed_splits_worked_by_hand(length, allowed):
    assert RNN.allowed_splits[length] == allowed


def test_one_width_is_the_single_width_splitter():
    one = UtteranceSplitter(8)
    assert one.candidate_splits == tuple((8,) * n for n in range(1, 5))
    assert one.splits_for_length[11] == (1, 2) and one.splits_for_length[7] == ()


def test_drawn_sizes_are_sorted_then_maybe_reversed_and_cover_the_utterance():
    seen = {tuple(RNN.chunk_sizes(50, utterance_rng(s, "u"))) for s in range(60)}
    assert seen == {(20, 30), (30, 20)}
    for s in range(30):  # a long utterance: 40s added until the tabulated length (120)
        sizes = RNN.chunk_sizes(300, utterance_rng(s, "v"))
        assert sizes in (sorted(sizes), sorted(sizes, reverse=True))
        assert sizes.count(40) >= 5 and set(sizes) <= {20, 30, 40}
        assert abs(sum(sizes) - 300) < 40


@pytest.mark.parametrize("length", [20, 37, 45, 50, 77, 123, 301])
def test_weights_are_one_over_coverage_and_zero_beyond_a_chunks_width(length):
    for s in range(10):
        ch = RNN.split_chunks(length, utterance_rng(s, "w"), (55, 20, 15, 20))
        cover = np.zeros(length)
        for f, w, row in zip(ch.first_frames, ch.sizes, ch.weights, strict=True):
            assert (row[w:] == 0).all() and f >= 0 and f + w <= length
            cover[f : f + w] += row[:w]
        assert np.allclose(cover[cover > 0], 1.0)
        if length == 45:  # two chunks overlapping by 5 frames: ½ in each
            assert sorted(ch.weights[0][ch.weights[0] > 0].tolist()).count(0.5) == 5


def test_first_and_last_chunks_get_the_initial_and_final_contexts():
    for s in range(10):
        ch = RNN.split_chunks(200, utterance_rng(s, "x"), (55, 21, 15, 20))
        n = len(ch.sizes)
        assert n >= 3
        assert ch.left_contexts.tolist() == [15] + [55] * (n - 1)
        assert ch.right_contexts.tolist() == [21] * (n - 1) + [20]
        lo = ch.first_frames - ch.left_contexts  # Kaldi's i-vector draw, own context
        assert ((ch.ivector_frames >= lo) & (ch.ivector_frames < lo + 200)).all()
    one = RNN.split_chunks(40, utterance_rng(0, "y"), (55, 21, 15, 20))
    assert one.left_contexts.tolist() == [15] and one.right_contexts.tolist() == [20]


CHUNK_OPTS = {
    "chunk_width": "20,12,8",
    "chunk_left_context": 5,
    "chunk_right_context": 1,
    "chunk_left_context_initial": 0,
    "chunk_right_context_final": 0,
}


def test_chunk_archives_hold_each_chunk_with_its_structure(synth, tmp_path):
    out = tmp_path / "egs"
    info = build_egs(synth, out, **CHUNK_OPTS)["info"]  # model context (3, 2)
    assert info.chunk_widths == [20, 12, 8] and info.frames_per_eg == 20
    assert (info.left_context, info.right_context) == (8, 3)
    assert (info.left_context_initial, info.right_context_final) == (3, 2)
    utts = sorted(synth.lengths)
    keys = []
    by_utt: dict[str, list] = {}
    for a in range(info.num_archives):
        arch = EgsArchive(out / f"egs.{a}")
        assert arch.meta.chunked and arch.frames_per_eg == 20
        assert (arch.left_context, arch.right_context) == (8, 3)
        keys += arch.read_keys()
        for mb in all_chunk_minibatches(arch, 3, 2, 7):
            w, left, right = mb.chunk
            assert mb.feats.shape[1:] == (left + w + right, 5) and mb.labels.shape[1] == w
            for i in range(mb.size):
                u, k = utts[int(mb.feats[i, left, 1])], int(mb.feats[i, left, 0])
                src = synth.feats(u)
                rows = np.clip(k - left + np.arange(left + w + right), 0, len(src) - 1)
                assert np.allclose(mb.feats[i].numpy(), src[rows].astype(np.float16))
                assert mb.labels[i].tolist() == [(k + t + utts.index(u)) % 7 for t in range(w)]
                assert (mb.weights[i] > 0).all()
                by_utt.setdefault(u, []).append((k, w, left, right))
    assert len(keys) == len(set(keys)) == info.num_train_egs
    valid = {u for u, _ in read_uttlist(out / "lists" / "valid")}
    assert valid and not valid & set(by_utt)
    for chunks in by_utt.values():
        chunks.sort()
        assert chunks[0][2] == 3 and all(c[2] == 8 for c in chunks[1:])
        assert chunks[-1][3] == 2 and all(c[3] == 3 for c in chunks[:-1])
        assert {c[1] for c in chunks} <= {20, 12, 8}
    assert {w for cs in by_utt.values() for _, w, _, _ in cs} == {20, 12, 8}
    # the diagnostic subsets are chunk egs too
    assert EgsArchive(out / "valid_diag").meta.chunked


def test_frame_egs_files_carry_no_chunk_keys(synth, tmp_path):
    out = tmp_path / "egs"
    build_egs(synth, out)
    info = json.loads((out / "info.json").read_text())
    assert not {"chunk_widths", "left_context_initial", "right_context_final"} & set(info)
    assert "chunked" not in json.loads((out / "egs.0.meta.json").read_text())
    assert not (out / "egs.0.chunks.npy").exists()
    with pytest.raises(ConfigError, match="chunk egs"):
        next(chunk_minibatches(EgsArchive(out / "egs.0"), 3, 2, 4, 10, 0))


def test_chunk_minibatches_merge_one_structure_each_time_by_the_rule(synth, tmp_path):
    out = tmp_path / "egs"
    build_egs(synth, out, **CHUNK_OPTS)
    arch = EgsArchive(out / "egs.0")
    structures = [tuple(r) for r in np.asarray(arch.chunks).tolist()]
    mbs = list(chunk_minibatches(arch, 3, 2, "4,2", 10, seed=5))
    again = list(chunk_minibatches(arch, 3, 2, "4,2", 10, seed=5))
    other = list(chunk_minibatches(arch, 3, 2, "4,2", 10, seed=6))
    seen = []
    for mb in mbs:
        assert mb.size in (4, 2)
        seen += [(int(mb.feats[i, mb.chunk[1], 1]), int(mb.feats[i, mb.chunk[1], 0]))
                 for i in range(mb.size)]  # fmt: skip
    assert len(seen) == len(set(seen))  # every eg at most once
    for s in set(structures):  # per structure: all but fewer than 2 egs merged
        n = structures.count(s)
        got = sum(mb.size for mb in mbs if mb.chunk == s)
        assert n - got < 2 and got == 4 * (n // 4) + 2 * ((n % 4) // 2)
    assert [m.feats.tolist() for m in mbs] == [m.feats.tolist() for m in again]
    assert [m.feats.tolist() for m in mbs] != [m.feats.tolist() for m in other]
    with pytest.raises(ConfigError, match="exceeds"):
        next(chunk_minibatches(arch, 4, 2, 4, 10, 0))  # initial left context is 3
