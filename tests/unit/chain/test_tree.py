"""The chain tree rebuilt from alignments at frame subsampling 3, left-biphone
(paravg/chain/tree.py: build_tree.sh's steps with paravg/gmm's tree builder): it splits a
phone by its left neighbour where the features differ by it, and the den FST, the
supervision and the transition model take it."""

import numpy as np
import pytest

from paravg.chain.tree import build_chain_tree, chain_tree_stats, subsampled_alignment
from paravg.errors import DataError

K, D = 4, 8  # targets 0..3 (chain phones 1..4, phone 1 silence); feature dim


def utterances(n=120, seed=0):
    """Frame targets and features: each frame its phone's one-hot in dims 0..3, and for
    phone 3 (target 2) an offset in dim 4 + its left phone's target, so that the
    left context of chain phone 3 (and of no other) is audible."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        runs = rng.integers(0, K, 12)
        runs = runs[np.r_[True, runs[1:] != runs[:-1]]]
        lens = rng.integers(4, 12, len(runs))
        t = np.repeat(runs, lens)
        left = np.repeat(np.r_[-1, runs[:-1]], lens)
        x = rng.normal(0, 0.1, (len(t), D))
        x[np.arange(len(t)), t] += 1.0
        third = (t == 2) & (left >= 0)
        x[np.flatnonzero(third), 4 + left[third]] += 5.0
        out.append((t, x))
    return out


def test_subsampled_alignment_marks_each_phones_first_frame():
    phones, classes = subsampled_alignment([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 3], 3)
    assert phones.tolist() == [1, 1, 2, 2]  # frames 0, 3, 6, 9 (frame 10's phone is lost)
    assert classes.tolist() == [0, 1, 0, 1]


def test_tree_stats_are_left_biphone_events_at_the_subsampled_rate():
    data = utterances(5)
    stats = chain_tree_stats(data)
    assert stats.context_width == 2 and stats.central_position == 1
    assert stats.count.sum() == sum(-(-len(t) // 3) for t, _ in data)
    silence = stats.events[:, 1] == 1
    assert (stats.events[silence, 0] == -1).all()  # silence is context-independent
    assert set(stats.events[~silence, 0].tolist()) <= {0, 1, 2, 3, 4}


def test_the_tree_splits_phone_3_by_its_left_neighbour_and_the_chain_code_takes_it(tmp_path):
    import kaldi_hmm_gmm

    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.egs import targets_to_phones
    from paravg.chain.phone_lm import estimate_phone_lm
    from paravg.chain.supervision import SupervisionOptions, alignment_supervision
    from paravg.chain.topology import chain_topology
    from paravg.gmm.event_map import PDF_CLASS_KEY

    data = utterances()
    ctx, built = build_chain_tree(data, K, num_leaves=30, tree_path=tmp_path / "tree")
    assert (ctx.context_width, ctx.central_position) == (2, 1)
    assert (tmp_path / "tree").read_bytes()[:2] == b"\0B"
    assert 6 <= built.num_leaves <= 30  # silence, phones 2 and 4, phone 3 by its left
    leaf = lambda left, phone, c: built.tree.map({0: left, 1: phone, PDF_CLASS_KEY: c})  # noqa: E731
    # phone 3's forward pdf depends on its left phone; phone 2's does not
    assert len({leaf(left, 3, 0) for left in (1, 2, 4)}) == 3
    assert len({leaf(left, 2, 0) for left in (1, 3, 4)}) == 1
    tm = kaldi_hmm_gmm.TransitionModel(ctx, chain_topology([2, 3, 4], [1]))
    assert tm.num_pdfs == built.num_leaves
    lm, _ = estimate_phone_lm([targets_to_phones(t)[0] for t, _ in data])
    den, _ = create_denominator_fst(lm, ctx, tm)
    assert den.num_states > 0
    phones, durations = targets_to_phones(data[0][0])
    sup = alignment_supervision(phones, durations, ctx, tm, None, SupervisionOptions(5, 5, 3))
    assert sup.num_states > 0 and set((sup.ilabel - 1).tolist()) <= set(range(tm.num_pdfs))


def test_no_targets_is_an_error():
    with pytest.raises(DataError, match="no utterance"):
        chain_tree_stats([])


def test_prepare_chain_with_the_biphone_tree_writes_it_and_load_chain_reads_it(tmp_path):
    """chain_den with model.chain.tree biphone: info.json's num_pdfs (the network's
    outputs) is the tree's leaves, and load_chain's tree maps phone 3's forward pdf by
    its left phone as the written tree does."""
    from paravg.chain.prepare import load_chain, prepare_chain
    from paravg.gmm.event_map import PDF_CLASS_KEY
    from paravg.gmm.tree_io import read_tree

    data = utterances()
    info = prepare_chain((t for t, _ in data), K, tmp_path, tree="biphone", num_leaves=30,
                         tree_utterances=iter(data))  # fmt: skip
    tree, width, central = read_tree(tmp_path / "tree")
    assert (info["tree"], width, central) == ("biphone", 2, 1)
    setup = load_chain(tmp_path)
    assert setup.num_pdfs == info["num_pdfs"] == setup.trans_model.num_pdfs
    assert 6 <= info["num_pdfs"] <= 30 and info["num_pdfs"] != 2 * K
    assert (setup.ctx_dep.context_width, setup.ctx_dep.central_position) == (2, 1)
    pdfs = {left: tree.map({0: left, 1: 3, PDF_CLASS_KEY: 0}) for left in (1, 2, 4)}
    assert len(set(pdfs.values())) == 3
    mono = prepare_chain((t for t, _ in data), K, tmp_path / "mono")
    assert (mono["tree"], mono["num_pdfs"]) == ("monophone", 2 * K)
    assert not (tmp_path / "mono" / "tree").exists()
    with pytest.raises(DataError, match="biphone tree needs the features"):
        prepare_chain((t for t, _ in data), K, tmp_path / "x", tree="biphone", num_leaves=30)
