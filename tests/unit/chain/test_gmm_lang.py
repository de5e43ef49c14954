"""Chain models from GMM alignments (``data.targets: gmm``, docs/chain.md): a GMM
alignment (transition-ids) becomes per-frame phones of the GMM lang (``ali-to-phones
--per-frame``, rule gmm_phones), read by the chain stage as targets ``p − 1``; the chain
setup over the lang's phones (its sets as the tree's roots, its silence phones
context-independent), and the chain word graph on the lang with the chain tree.

The lang: three base phones ``aa bb cc`` and three words, as tests/unit/gmm/test_alignment.py;
prepare_lang.sh numbers ``sil`` 1, its variants 2-5, ``spn`` 6-10, ``aa_B aa_E aa_I aa_S``
11-14, ``bb_*`` 15-18, ``cc_*`` 19-22 (22 real phones, 5 sets)."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.chain.prepare import FrameTargets, load_chain, prepare_chain
from paravg.chain.topology import ChainPhones
from paravg.errors import DataError
from paravg.gmm.data import prepare_gmm_lang, write_dict_dir

LEXICON = [("x", 1.0, ("aa", "bb")), ("y", 1.0, ("cc",)), ("z", 1.0, ("bb", "cc", "aa"))]
SIL, AA_B, BB_E, CC_S, BB_B, CC_I, AA_E = 1, 11, 16, 22, 15, 21, 12


@pytest.fixture(scope="module")
def lang(tmp_path_factory):
    d = tmp_path_factory.mktemp("lang")
    write_dict_dir(d / "dict", LEXICON, ["aa", "bb", "cc"])
    prepare_gmm_lang(d / "dict", d / "lang")
    return d / "lang"


@pytest.fixture(scope="module")
def table(lang):
    from paravg.gmm.alignment import TransitionTable
    from paravg.gmm.train_mono import init_mono_model

    model = init_mono_model(lang, [np.random.default_rng(0).normal(size=(50, 4))])
    return TransitionTable.of(model.trans)


def tid(table, phone, state, self_loop, final=False):
    """The transition-id of ``phone``'s HMM state ``state`` (its self-loop, or a forward
    transition: the exit one when ``final``)."""
    ids = np.flatnonzero(
        (table.phone == phone)
        & (table.hmm_state == state)
        & (table.is_self_loop == self_loop)
        & (table.is_final == final)
    )
    return int(ids[0])


def test_an_alignment_becomes_per_frame_lang_phones_and_chain_targets(lang, table, tmp_path):
    """Hand-worked: "x y" spoken as sil (3 frames), aa_B (4), bb_E (3), cc_S (3), sil (2).
    Each frame's phone is its transition-id's (the GMM topology's 3 states of a
    non-silence phone: forward on the first frame of a state, self-loops after, the exit
    transition on the last frame); the chain targets are those ids − 1; the chain phone
    sequence (runs) is sil aa_B bb_E cc_S sil with their durations."""
    from paravg.chain.egs import targets_to_phones
    from paravg.gmm.alignment import write_alignments
    from paravg.gmm.model import GmmModel
    from paravg.gmm.stages import frame_phones
    from paravg.gmm.train_mono import init_mono_model
    from paravg.kaldi_io import load_scp, write_ark_scp

    sil = [tid(table, SIL, 0, True), tid(table, SIL, 0, False), tid(table, SIL, 4, False, True)]
    aa = [tid(table, AA_B, 0, False), tid(table, AA_B, 1, False), tid(table, AA_B, 2, True),
          tid(table, AA_B, 2, False, True)]  # fmt: skip
    bb = [tid(table, BB_E, 0, False), tid(table, BB_E, 1, False), tid(table, BB_E, 2, False, True)]
    cc = [tid(table, CC_S, 0, False), tid(table, CC_S, 1, False), tid(table, CC_S, 2, False, True)]
    end = [tid(table, SIL, 3, False), tid(table, SIL, 4, False, True)]
    ali = np.array(sil + aa + bb + cc + end, np.int32)
    phones = [1, 1, 1, 11, 11, 11, 11, 16, 16, 16, 22, 22, 22, 1, 1]
    # gmm_phones on an alignment file: the ark/scp the chain stage reads
    model = init_mono_model(lang, [np.random.default_rng(0).normal(size=(50, 4))])
    model.save(tmp_path / "final.mdl")
    assert GmmModel.load(tmp_path / "final.mdl").trans.num_transition_ids == len(table.phone) - 1
    write_alignments(tmp_path / "ali.1.ark", {"u1": ali})
    out = frame_phones(tmp_path / "final.mdl", [tmp_path / "ali.1.ark"], tmp_path / "phones.ark",
                       tmp_path / "phones.scp")  # fmt: skip
    assert out == {"utterances": 1, "frames": 15}
    read = load_scp(tmp_path / "phones.scp")
    assert read["u1"].tolist() == phones
    targets = FrameTargets.of(read, {"frame_labels": "phones"})
    assert targets["u1"].tolist() == [p - 1 for p in phones]
    assert targets_to_phones(targets["u1"]) == ([1, 11, 16, 22, 1], [3, 4, 3, 3, 2])
    # a table of targets (data.targets: data) is read as it is
    assert FrameTargets.of(read, {})["u1"].tolist() == phones
    # phone 0 (<eps>) is no phone: named with its file, line and utterance
    write_ark_scp([("u2", np.zeros(3, np.int32))], tmp_path / "p2.ark", tmp_path / "p2.scp")
    bad = FrameTargets.of(load_scp(tmp_path / "p2.scp"), {"frame_labels": "phones"})
    with pytest.raises(DataError, match=r"p2\.scp:1: utterance 'u2'.*phone id 0"):
        bad["u2"]


def test_the_chain_phones_of_a_lang(lang):
    phones = ChainPhones.of_lang(lang)
    assert phones.num_phones == 22 and phones.silence == tuple(range(1, 11))
    topo = phones.topo_text()
    assert " ".join(str(p) for p in range(1, 23)) in topo  # gen_topo.py: sil, then the others
    assert topo == ChainPhones(22).topo_text()  # one entry: the same topology as targets'


def utterances(n=60, seed=0):
    """(targets, features) of utterances "x y" / "z" with silence around, durations
    random: lang phone ``p`` is target ``p − 1``; features: each frame its phone's id in
    dim 0."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        seq = [SIL, AA_B, BB_E, CC_S, SIL] if rng.random() < 0.5 else [SIL, BB_B, CC_I, AA_E, SIL]
        p = np.repeat(seq, rng.integers(3, 9, len(seq)))
        x = rng.normal(0, 0.1, (len(p), 4))
        x[:, 0] += p
        out.append((p - 1, x))
    return out


def test_the_monophone_tree_on_a_lang_shares_a_phones_pdfs_among_its_variants(lang, tmp_path):
    data = utterances()
    info = prepare_chain((t for t, _ in data), 22, tmp_path, lang_dir=lang)
    assert info["num_pdfs"] == 10  # 5 sets (sil, spn, aa, bb, cc) x forward, self-loop
    assert info["tree_file"] and info["frame_labels"] == "phones"
    setup = load_chain(tmp_path)
    assert setup.num_pdfs == 10 and setup.num_phones == 22
    tm = setup.trans_model
    pdfs = {}
    for t in range(1, tm.num_transition_ids + 1):
        pdfs.setdefault(tm.transition_id_to_phone(t), set()).add(tm.transition_id_to_pdf(t))
    assert pdfs[11] == pdfs[12] == pdfs[14] == {4, 5}  # aa_B, aa_E, aa_S: set 2
    assert pdfs[22] == {8, 9} and pdfs[1] == pdfs[5] == {0, 1}
    with pytest.raises(DataError, match="22 real phones, num_targets 40"):
        prepare_chain((t for t, _ in data), 40, tmp_path / "x", lang_dir=lang)


def test_the_biphone_tree_on_a_lang_is_the_default_kaldi_tree(lang, tmp_path):
    from paravg.gmm.tree_io import read_tree

    data = utterances()
    info = prepare_chain((t for t, _ in data), 22, tmp_path, tree="biphone", num_leaves=40,
                         tree_utterances=iter(data), tree_thresh=0.0, lang_dir=lang)  # fmt: skip
    _tree, width, central = read_tree(tmp_path / "tree")
    assert (width, central) == (2, 1) and info["tree"] == "biphone"
    assert load_chain(tmp_path).num_pdfs == info["num_pdfs"]


def spell(trans_model, phones, frames_per_phone):
    """Log-likelihoods: each phone's first frame its forward pdf (0), later frames its
    self-loop pdf; every other pdf −10 (the monophone tree: no context)."""
    fwd, loop = {}, {}
    for t in range(1, trans_model.num_transition_ids + 1):
        table = loop if trans_model.is_self_loop(t) else fwd
        table[trans_model.transition_id_to_phone(t)] = trans_model.transition_id_to_pdf(t)
    rows = []
    for p in phones:
        for f in range(frames_per_phone):
            row = np.full(trans_model.num_pdfs, -10.0)
            row[(loop if f else fwd)[p]] = 0.0
            rows.append(row)
    return np.array(rows)


@pytest.mark.parametrize("frames_per_phone", [1, 3])
def test_the_chain_graph_on_the_lang_decodes_its_words(lang, tmp_path, frames_per_phone):
    """The chain word graph of the GMM lang (L from its lexicon, G the bigram of the
    training sentences) with the chain setup's tree and transition model: acoustics that
    score the phones of "x y" and of "z" decode to those words at acoustic scale 1."""
    import json

    from paravg.chain.graph import chain_lang_graph
    from paravg.decode.reference import GraphDecoder
    from paravg.decode.search import SearchOptions
    from paravg.graph.load import load_graph

    prepare_chain((t for t, _ in utterances()), 22, tmp_path / "chain", lang_dir=lang)
    summary = chain_lang_graph(lang, tmp_path / "chain", tmp_path / "graph",
                               sentences=[["x", "y"], ["z"], ["y", "x"]])  # fmt: skip
    assert summary["topology"] == "chain" and summary["num_pdfs"] == 10
    assert summary["options"]["self_loop_scale"] == 1.0
    assert json.loads((tmp_path / "graph" / "graph.json").read_text())["source"] == "gmm"
    tm = load_chain(tmp_path / "chain").trans_model
    decoder = GraphDecoder(load_graph(tmp_path / "graph"), SearchOptions(acoustic_scale=1.0),
                           [0.0])  # fmt: skip
    for words, phones in ((["x", "y"], [SIL, AA_B, BB_E, CC_S, SIL]),
                          (["z"], [SIL, BB_B, CC_I, AA_E, SIL])):  # fmt: skip
        got = decoder.decode("u", spell(tm, phones, frames_per_phone), 1, 0.0)
        assert got == words


def test_the_copies_of_a_perturbed_set_get_their_sources_phones_mapped_as_targets(tmp_path):
    """data.perturb on GMM alignments (rule chain_perturbed_phones): copy ``sp0.9-u1`` of
    12 frames takes, at frame i, the source's phone of frame ⌊(i + ½)·0.9⌋ (as its
    targets: 0 1 2 3 4 4 5 6 7 8 9 9); ``sp1.0-u1`` the source's; a copy whose source
    has no phones is an error naming both."""
    from paravg.kaldi_io import load_scp, write_ark_scp
    from paravg.perturb import PerturbOptions, perturb_frame_labels

    phones = np.array([1, 1, 11, 11, 11, 16, 16, 22, 22, 1], np.int32)  # 10 frames
    write_ark_scp([("u1", phones)], tmp_path / "src.ark", tmp_path / "src.scp")
    copies = [("sp0.9-u1", np.zeros(12, np.int32)), ("sp1.0-u1", np.zeros(10, np.int32))]
    write_ark_scp(copies, tmp_path / "t.ark", tmp_path / "t.scp")
    opts = PerturbOptions(speed=(0.9, 1.0))
    out = perturb_frame_labels(tmp_path / "src.scp", tmp_path / "t.scp", opts,
                               tmp_path / "sp.ark", tmp_path / "sp.scp")  # fmt: skip
    assert out == {"utterances": 2, "frames": 22}
    got = load_scp(tmp_path / "sp.scp")
    assert got["sp0.9-u1"].tolist() == [1, 1, 11, 11, 11, 11, 16, 16, 22, 22, 1, 1]
    assert got["sp1.0-u1"].tolist() == phones.tolist()
    write_ark_scp([("sp0.9-u2", np.zeros(5, np.int32))], tmp_path / "b.ark", tmp_path / "b.scp")
    with pytest.raises(DataError, match=r"no labels for utterance 'u2'.*'sp0\.9-u2'"):
        perturb_frame_labels(tmp_path / "src.scp", tmp_path / "b.scp", opts,
                             tmp_path / "x.ark", tmp_path / "x.scp")  # fmt: skip
