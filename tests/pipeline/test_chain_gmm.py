"""A chain model trained from GMM alignments, the path a user with wav + text + lexicon
takes (``data.targets: gmm``, docs/chain.md): the GMM stages (lang, mono, tree, tri,
alignment of every set) run, ``gmm_phones`` turns each set's final alignment into
per-frame phones of the GMM lang (``ali-to-phones --per-frame``), carried to the speed
copies as their targets are (``chain_perturbed_phones``), ``chain_den`` builds the
chain topology over the lang's phones, the left-biphone tree (the default on this path,
Kaldi's), the phone LM and the den FST from the training set's; a few iterations train
the chain TDNN-F; ``all`` decodes it on the chain word graph of the GMM lang (L from the
lexicon, the chain tree), scores a WER and exports it, and vosk decodes the export.

A clone of the shared upstream workspace (its demo corpus is reused; every set is
re-prepared from the GMM stage's targets, so its features and egs are rebuilt), with the
GMM stages cut to a few iterations and i-vectors off: this test's subject is the wiring.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from .conftest import TINY_TDNNF, WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

TRI_ITERS = 3
CHAIN = {
    "model": {**TINY_TDNNF, "frame_subsampling_factor": 3, "objective": "chain"},
    "trainer": {"minibatch_size": 32, "num_epochs": 0.67},  # each archive read f = 3 times an epoch
}
OVERLAY = {
    # speed perturbation, as Kaldi's chain recipes train on train_sp: the copies' phones
    # are their source's mapped as their targets (chain_perturbed_phones)
    "data": {"targets": "gmm", "perturb": {"speed": [0.9, 1.0, 1.1]}},
    "ivector": {"enabled": False},
    "gmm": {
        "nj": 2,
        "mono": {"num_iters": 4, "totgauss": 150, "max_iter_inc": 2, "realign_iters": [1, 2]},
        "tri": {"num_leaves": 60, "tot_gauss": 200, "num_iters": TRI_ITERS, "max_iter_inc": 2,
                "realign_iters": [2]},
    },
    # chain egs: 30 input frames (10 outputs) per eg
    "egs": {"frames_per_eg": 30, "samples_per_iter": 120},
    "experiments": {"chain": CHAIN},
}  # fmt: skip
EXP = Path("results/exp/chain")


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("chain_gmm")
    proc = run_snakemake(ws, "--cores", "2", *WARM, "all", overlay=OVERLAY)
    check_ok(proc, "the chain run on GMM alignments")
    ws.joinpath("run.log").write_text(proc.stdout)
    return ws


def test_the_chain_setup_comes_from_the_gmm_alignments_and_lang(workdir):
    from paravg.gmm.alignment import TransitionTable, ali_to_phones, read_alignments
    from paravg.gmm.model import GmmModel
    from paravg.gmm.tree_io import read_tree
    from paravg.graph.lang import read_symbol_table
    from paravg.kaldi_io import load_scp

    r = workdir / "results"
    lang_phones = read_symbol_table(r / "gmm/lang/phones.txt")
    real = [p for p in lang_phones if p[0] not in "<#"]
    info = json.loads((r / "egs/chain/info.json").read_text())
    # the chain phones are the GMM lang's (position-dependent, sil first), the tree
    # build_tree.sh's left biphone, the frame labels the lang's phone ids
    assert info["num_phones"] == len(real) and lang_phones["sil"] == 1, info
    assert info["tree"] == "biphone" and info["frame_labels"] == "phones", info
    _tree, width, central = read_tree(r / "egs/chain/tree")
    assert (width, central) == (2, 1)
    # gmm_phones: ali-to-phones --per-frame of the final triphone alignment, one phone per
    # frame of each prepared utterance's targets (the network's frames)
    table = TransitionTable.of(GmmModel.load(r / f"gmm/tri/{TRI_ITERS}.mdl").trans)
    phones = load_scp(r / "gmm/phones/train/phones.scp")
    alis = read_alignments(r / "gmm/ali/train/ali.1.ark")
    utt = sorted(alis)[0]
    assert np.array_equal(phones[utt], ali_to_phones(table, alis[utt], per_frame=True))
    targets = load_scp(r / "data/train/targets.scp")
    assert set(targets) <= set(phones)
    assert all(len(phones[u]) == len(targets[u]) for u in targets)
    ids = np.concatenate([np.asarray(phones[u]) for u in targets])
    assert ids.min() >= 1 and ids.max() <= len(real)
    assert len(np.unique(ids)) > 40  # word-position variants of the demo's 41 phones
    # the speed copies (the network's training set): each copy's phones are its source's
    # mapped as perturb_data mapped its targets, one per frame of its targets
    copies = load_scp(r / "gmm/phones/train_sp/phones.scp")
    copy_targets = load_scp(r / "data/train_sp/targets.scp")
    assert set(copies) == set(copy_targets) and len(copies) == 3 * len(targets)
    assert all(len(copies[u]) == len(copy_targets[u]) for u in copy_targets)
    assert all(np.array_equal(copies[f"sp1.0-{u}"], phones[u]) for u in targets)
    slow = f"sp0.9-{utt}" if utt in targets else f"sp0.9-{sorted(targets)[0]}"
    assert len(copies[slow]) > len(phones[slow.removeprefix("sp0.9-")])
    # the network's outputs are the chain tree's pdfs (the egs' targets: the GMM tree's)
    init = json.loads((workdir / EXP / "init.json").read_text())
    assert init["num_targets"] == info["num_pdfs"]
    egs = json.loads((r / "egs/info.json").read_text())
    assert egs["num_targets"] == int((r / "gmm/tri/num_pdfs").read_text())


def test_it_trains_decodes_on_the_gmm_lang_and_exports_a_chain_model(workdir):
    from paravg.export.final_mdl import read_final_mdl

    r = workdir / "results"
    num_pdfs = json.loads((r / "egs/chain/info.json").read_text())["num_pdfs"]
    diags = sorted((workdir / EXP / "diag").glob("*.json"), key=lambda p: int(p.stem))
    first, last = (json.loads(p.read_text()) for p in (diags[0], diags[-1]))
    assert len(diags) >= 3 and last["valid"]["failed_minibatches"] == 0, last
    assert last["train"]["chain_objf"] > first["train"]["chain_objf"], (first, last)
    # the evaluation read the test set's phones (its chain objective or why not)
    evaluated = json.loads((workdir / EXP / "eval" / "test.json").read_text())
    assert evaluated["frame_accuracy"] is None and "chain_objf" in evaluated, evaluated
    # the chain word graph: the GMM lang (its L and words), the chain tree and topology
    graph = json.loads((r / "graph/chain_words/graph.json").read_text())
    assert graph["source"] == "gmm" and graph["topology"] == "chain", graph
    assert graph["num_pdfs"] == num_pdfs
    assert (graph["context_width"], graph["central_position"]) == (2, 1), graph
    assert graph["options"]["self_loop_scale"] == 1.0
    assert (r / "graph/chain_words/words.txt").read_text() == (r / "gmm/lang/words.txt").read_text()
    assert not (r / "graph/chain_phones").exists()  # no PER on GMM targets (yet)
    split = json.loads((workdir / EXP / "decode/test/split0.json").read_text())
    assert split["objective"] == "chain" and split["frame_subsampling_factor"] == 3, split
    scores = json.loads((workdir / EXP / "decode/test/scores.json").read_text())
    assert 0 <= scores["wer"] <= 100, scores
    # the export: Kaldi's chain final.mdl with the tree's pdfs, vosk's model.conf, the graph
    kaldi = workdir / EXP / "kaldi"
    am = read_final_mdl(kaldi / "am" / "final.mdl")
    assert len(am.priors) == 0 and am.nnet.output_dim() == num_pdfs
    assert am.transition_model.num_pdfs == num_pdfs
    conf = (kaldi / "conf" / "model.conf").read_text().split()
    assert "--acoustic-scale=1" in conf and "--frame-subsampling-factor=3" in conf, conf
    assert (kaldi / "graph" / "HCLG.fst").read_bytes() == (
        r / "graph/chain_words/HCLG.fst"
    ).read_bytes()


def test_vosk_decodes_the_export_to_words_of_the_gmm_lexicon(workdir):
    """vosk loads the exported chain model (no i-vectors in this run) and decodes test
    utterances to words of the GMM lang; paravg's own decoding of the same utterances
    at its LMWT is the comparison (the tiny model is barely trained: agreement, not
    accuracy, is the check)."""
    import shutil

    from paravg.export.verify import VOSK_GRAPH_SCALE, vosk_decode

    from .vosk_checks import (
        decoded_wavs,
        set_decoder_option,
        set_search_beams_of_paravgs_decoding,
        utterances,
    )

    r = workdir / "results"
    scores = json.loads((workdir / EXP / "decode/test/scores.json").read_text())
    lmwt = float(scores["lmwt"])
    hyps = json.loads((workdir / EXP / "decode/test/hyps.json").read_text())
    ours = {u: hyps["words"][f"{lmwt:g}_0"][u] for u in utterances(workdir)}
    kaldi = workdir / "kaldi_vosk"
    shutil.copytree(workdir / EXP / "kaldi", kaldi)
    # paravg's search at acoustic scale 1, lattices × post_decode_acwt, scored at LMWT:
    # vosk's graph scale 0.9 and acoustic scale 0.9 · post_decode_acwt / LMWT match it
    post = float(
        json.loads((workdir / EXP / "decode/test/split0.json").read_text())["post_decode_acwt"]
    )
    set_decoder_option(kaldi, "acoustic-scale", VOSK_GRAPH_SCALE * post / lmwt)
    set_search_beams_of_paravgs_decoding(kaldi)
    vosk = vosk_decode(kaldi, decoded_wavs(workdir))
    words = set((r / "gmm/lang/words.txt").read_text().split()[::2])
    assert set(vosk) == set(ours)
    assert all(set(h.split()) <= words for h in vosk.values())
    identical = sum(ours[u] == vosk[u] for u in ours) / len(ours)
    assert identical >= 0.5, (ours, vosk)
