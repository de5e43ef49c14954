"""Training graphs, equal alignment, Viterbi alignment and the alignment tools on a tiny
lang dir (three phones, three words): align-equal-compiled, SplitToPhones, ali-to-pdf,
ali-to-phones, the ark and text files, convert-ali and acc-tree-stats."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.gmm.align import (
    AlignOptions,
    align,
    align_equal,
    compile_graphs,
    graph_compiler,
    read_transcripts,
)
from paravg.gmm.alignment import (
    TransitionTable,
    acc_tree_stats,
    ali_to_pdf,
    ali_to_phones,
    convert_alignment,
    read_alignments,
    split_to_phones,
    write_alignments,
)
from paravg.gmm.data import prepare_gmm_lang, write_dict_dir
from paravg.gmm.train_mono import init_mono_model
from paravg.graph.lang import read_symbol_table

LEXICON = [("x", 1.0, ("aa", "bb")), ("y", 1.0, ("cc",)), ("z", 1.0, ("bb", "cc", "aa"))]


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    d = tmp_path_factory.mktemp("lang")
    write_dict_dir(d / "dict", LEXICON, ["aa", "bb", "cc"])
    prepare_gmm_lang(d / "dict", d / "lang")
    (d / "text").write_text("u1 x y\nu2 z\nu3 y x q\n")
    return d


def test_equal_alignment_shares_frames_equally(lang):
    model = init_mono_model(lang / "lang", [np.random.default_rng(0).normal(size=(50, 4))])
    table = TransitionTable.of(model.trans)
    phones = read_symbol_table(lang / "lang/phones.txt")
    words = read_transcripts(lang / "lang", lang / "text")
    assert words["u3"][-1] == read_symbol_table(lang / "lang/words.txt")["<unk>"]  # OOV mapped
    graphs = compile_graphs(graph_compiler(model, lang / "lang"), words)
    result = align_equal(graphs, {"u1": 60, "u2": 91, "u3": 4})
    assert result.failed == ["u3"]  # 4 frames cannot pass 4+ phones of 3 states
    for utt, n in (("u1", 60), ("u2", 91)):
        ali = result.alignments[utt]
        assert len(ali) == n
        pieces = split_to_phones(table, ali)
        assert sum(map(len, pieces)) == n
        seq = [int(table.phone[p[0]]) for p in pieces]
        assert seq == ali_to_phones(table, ali).tolist()
        per_frame = ali_to_phones(table, ali, per_frame=True)
        assert per_frame.tolist() == [
            p for piece in pieces for p in [int(table.phone[piece[0]])] * len(piece)
        ]
        # every emitting state of the graph gets the same share of frames (+- 1)
        states = [int(table.hmm_state[t]) for t in ali]
        runs = np.diff(np.flatnonzero(np.diff([-1, *states, -1]) != 0))
        assert runs.max() - runs.min() <= 1
        names = [k for k, v in sorted(phones.items(), key=lambda kv: kv[1])]
        spoken = [names[p] for p in seq if not names[p].startswith("sil")]
        assert spoken == {"u1": ["aa_B", "bb_E", "cc_S"], "u2": ["bb_B", "cc_I", "aa_E"]}[utt]
        assert (ali_to_pdf(table, ali) == table.pdf[ali]).all()


def test_viterbi_alignment_finds_the_phone_boundaries(lang):
    """Utterances of "x y", "y x" and "z" (aa bb cc, cc aa bb, bb cc aa) between silences
    of 3-11 frames, whose feature means are the phone's: after a few EM steps from equal
    alignments (flat start), Viterbi puts the phone boundaries where the data changes.

    The transcripts vary so that silence has different neighbours: with one transcript
    for every utterance, the first state of its first phone and the last state of its
    last phone model the edge silences as well as ``sil`` does, and flat-start EM ends
    there (no frame aligned to ``sil``) for most seeds. Silences are at least 3 frames,
    the least ``sil``'s HMM can take. Flat-start EM on this toy still has local optima:
    over seeds 0-99, 93 pass with make_lexicon_fst.py's L (18 with an L whose start arc
    carries ``sil``); the seed is fixed."""
    from paravg.gmm.accumulate import EstOptions, accumulate, estimate

    rng = np.random.default_rng(4)
    model = init_mono_model(lang / "lang", [rng.normal(size=(50, 2))])
    table = TransitionTable.of(model.trans)
    syms = read_symbol_table(lang / "lang/words.txt")
    # phones 0 1 2 3 = aa bb cc sil
    transcripts = [(["x", "y"], [0, 1, 2]), (["y", "x"], [2, 0, 1]), (["z"], [1, 2, 0])]
    feats, truth, text = {}, {}, {}
    for k in range(24):
        transcript, order = transcripts[k % 3]
        durations = rng.integers([3, 6, 6, 6, 3], [12, 30, 30, 30, 12])
        truth[f"u{k}"] = np.repeat([3, *order, 3], durations)
        text[f"u{k}"] = [syms[w] for w in transcript]
        means = np.array([0.0, 5.0, 10.0, -5.0])[truth[f"u{k}"]]
        feats[f"u{k}"] = (means[:, None] + 0.5 * rng.normal(size=(len(means), 2))).astype(
            np.float32
        )
    graphs = compile_graphs(graph_compiler(model, lang / "lang"), text)
    ali = align_equal(graphs, {u: len(x) for u, x in feats.items()}).alignments
    for _ in range(5):
        estimate(
            model, accumulate(model, feats, ali, table.pdf), EstOptions(min_gaussian_occupancy=1)
        )
        result = align(model, graphs, feats, AlignOptions(beam=10, retry_beam=40))
        ali = result.alignments
    assert result.failed == [] and result.frames == sum(map(len, feats.values()))
    phones = read_symbol_table(lang / "lang/phones.txt")
    base = {phones[f"{p}_{pos}"]: i for i, p in enumerate(["aa", "bb", "cc"]) for pos in "BEIS"}
    base[phones["sil"]] = 3
    agree = [
        np.array([base.get(int(p), -1) for p in ali_to_phones(table, ali[u], per_frame=True)])
        == truth[u]
        for u in feats
    ]
    assert np.concatenate(agree).mean() > 0.95


def test_alignment_files_round_trip(tmp_path):
    alis = {"a": np.array([1, 2, 3], np.int32), "b": np.array([7] * 5, np.int32)}
    for name in ("ali.1.ark", "ali.1.txt"):
        write_alignments(tmp_path / name, alis)
        back = read_alignments(tmp_path / name)
        assert list(back) == ["a", "b"] and all((back[k] == alis[k]).all() for k in alis)
    assert (tmp_path / "ali.1.txt").read_text() == "a 1 2 3\nb 7 7 7 7 7\n"


def test_convert_to_the_same_tree_is_identity_and_tree_stats_count_frames(lang):
    model = init_mono_model(lang / "lang", [np.random.default_rng(2).normal(size=(50, 3))])
    table = TransitionTable.of(model.trans)
    words = read_transcripts(lang / "lang", lang / "text")
    graphs = compile_graphs(graph_compiler(model, lang / "lang"), words)
    alis = align_equal(graphs, {"u1": 40, "u2": 50}).alignments
    for ali in alis.values():
        np.testing.assert_array_equal(convert_alignment(table, table, model.ctx, ali), ali)
    feats = {u: np.random.default_rng(3).normal(size=(len(a), 3)) for u, a in alis.items()}
    sil = [int(x) for x in (lang / "lang/phones/context_indep.csl").read_text().strip().split(":")]
    stats = acc_tree_stats(table, feats, alis, ci_phones=sil)
    assert stats.count.sum() == 90
    # an event's central phone and pdf-class come from the frames' transition-ids
    ali = np.concatenate(list(alis.values()))
    centre = stats.events[:, 1]
    for phone in set(table.phone[ali].tolist()):
        assert stats.count[centre == phone].sum() == (table.phone[ali] == phone).sum()
    # silence is context-independent: its events have no context keys
    assert (stats.events[np.isin(centre, sil)][:, [0, 2]] == -1).all()


def test_frame_and_boundary_agreement_by_hand():
    from paravg.gmm.alignment import boundary_agreement, frame_agreement

    phone_map = np.array([-1, 0, 1, 2, 2])  # our phones 3 and 4 are both label 2
    ours = {"a": np.array([1, 1, 1, 2, 2, 2, 2, 4, 4, 4]), "extra": np.array([1])}
    ref = {"a": np.array([0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2]), "missing": np.array([0, 0])}
    # 10 frames compared (the reference is cut to ours): frames 2 and 7 differ
    assert frame_agreement(ours, ref, phone_map) == pytest.approx(8 / 10)
    # reference boundaries at 2 and 8; ours at 3 and 7: both within 1 frame, not within 0
    assert boundary_agreement(ours, ref, phone_map, tolerance=1) == 1.0
    assert boundary_agreement(ours, ref, phone_map, tolerance=0) == 0.0


def _tree_job(lang, tmp_path, utts: int = 9):
    """A job of ``utts`` equally aligned utterances of "x y" / "z" (25-65 frames) with
    random 3-dim features, as files (feats.scp, ali.1.ark, the model) and as mappings."""
    from paravg.kaldi_io import write_ark_scp

    rng = np.random.default_rng(7)
    model = init_mono_model(lang / "lang", [rng.normal(size=(50, 3))])
    model.save(tmp_path / "0.mdl")
    words = read_transcripts(lang / "lang", lang / "text")
    text = {f"a{i}": words["u1" if i % 2 else "u2"] for i in range(utts)}
    graphs = compile_graphs(graph_compiler(model, lang / "lang"), text)
    alis = align_equal(graphs, {u: 25 + 5 * i for i, u in enumerate(text)}).alignments
    feats = {u: rng.normal(size=(len(a), 3)).astype(np.float32) for u, a in alis.items()}
    write_ark_scp(sorted(feats.items()), tmp_path / "feats.ark", tmp_path / "feats.scp")
    write_alignments(tmp_path / "ali.1.ark", alis)
    return model, feats, alis


def test_tree_stats_per_chunk_sum_to_one_pass_with_the_same_events(lang, tmp_path, monkeypatch):
    """stages.tree_acc (gmm_tree_acc) streams the job's tables; with chunks of 100 frames
    the chunks' stats, summed as sum-tree-stats sums jobs', have one pass's events in
    its order and its counts, Σx and Σx² up to the order of the sums; in one chunk (a job
    under CHUNK_FRAMES) they are one pass's, bit for bit."""
    from paravg.gmm import accumulate as acc_module
    from paravg.gmm.model import GmmModel
    from paravg.gmm.stages import tree_acc
    from paravg.gmm.tree_stats import TreeStats

    _, feats, alis = _tree_job(lang, tmp_path)
    model = GmmModel.load(tmp_path / "0.mdl")
    sil = [int(x) for x in (lang / "lang/phones/context_indep.csl").read_text().strip().split(":")]
    whole = acc_tree_stats(TransitionTable.of(model.trans), feats, alis, ci_phones=sil)
    assert whole.count.sum() == sum(len(a) for a in alis.values()) == 405

    def run(name):
        tree_acc(lang / "lang", tmp_path / "0.mdl", tmp_path / "feats.scp",
                 tmp_path / "ali.1.ark", tmp_path / name)  # fmt: skip
        return TreeStats.load(tmp_path / name)

    same = run("one.npz")
    for field in ("events", "count", "x_stats", "x2_stats"):
        np.testing.assert_array_equal(getattr(same, field), getattr(whole, field), field)
    chunks, real = [], acc_module.frame_chunks
    monkeypatch.setattr(acc_module, "CHUNK_FRAMES", 100)
    monkeypatch.setattr(
        acc_module, "frame_chunks", lambda u, n: (chunks.append(c) or c for c in real(u, n))
    )
    chunked = run("chunked.npz")
    # utterances of 25, 30, …, 65 frames in chunks of at most 100
    assert [sum(len(x) for _u, x, _a in c) for c in chunks] == [90, 85, 50, 55, 60, 65]
    np.testing.assert_array_equal(chunked.events, whole.events)
    np.testing.assert_array_equal(chunked.count, whole.count)
    for field in ("x_stats", "x2_stats"):
        got, want = getattr(chunked, field), getattr(whole, field)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10 * np.abs(want).max())


def test_tree_stats_of_an_unsorted_or_mismatched_table_name_file_and_utterance(lang, tmp_path):
    from paravg.errors import DataError
    from paravg.gmm.stages import tree_acc

    _, _, alis = _tree_job(lang, tmp_path, utts=3)
    ali = tmp_path / "ali.1.ark"
    write_alignments(ali, {u: alis[u] for u in ("a0", "a2", "a1")})
    args = (lang / "lang", tmp_path / "0.mdl", tmp_path / "feats.scp", ali, tmp_path / "t.npz")
    with pytest.raises(DataError, match=rf"{ali}: not sorted: 'a1' after 'a2'"):
        tree_acc(*args)
    write_alignments(ali, {"a0": alis["a0"], "a1": alis["a1"][:-2], "a2": alis["a2"]})
    with pytest.raises(DataError, match=rf"{ali}: utterance a1: alignment of 28 frames"):
        tree_acc(*args)
    write_alignments(ali, {"b0": alis["a0"]})
    with pytest.raises(DataError, match="no utterance has both features"):
        tree_acc(*args)
    assert not (tmp_path / "t.npz").exists()
