"""A chain run with the left-biphone chain tree (``model.chain.tree: biphone``,
docs/chain.md): ``chain_den`` grows the tree from the train set's targets and features
(``build_tree.sh --context-width=2 --central-position=1`` at frame subsampling 3), the
network gets the tree's pdfs as outputs (``<egs>/chain/info.json``, not 2K), a few
iterations train it, and ``all`` decodes it on chain graphs built with that tree (context
width 2, central position 1) and exports it. Kept small: test_chain.py runs the rest of
the chain DAG with the monophone tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import WARM, check_ok, run_snakemake
from .test_chain import CHAIN

pytestmark = pytest.mark.pipeline

NUM_LEAVES = 150
BIPHONE = {
    **CHAIN,
    # thresh 0: the tiny run's 4,478 subsampled frames pass no split at Kaldi's 300
    "model": {
        **CHAIN["model"],
        "chain": {"tree": "biphone", "num_leaves": NUM_LEAVES, "thresh": 0},
    },
    "trainer": {**CHAIN["trainer"], "num_epochs": 0.2},
}
OVERLAY = {
    "egs": {"frames_per_eg": 30, "samples_per_iter": 120},
    "experiments": {"bi": BIPHONE},
}
EXP = Path("results/exp/bi")


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("chain_biphone")
    check_ok(run_snakemake(ws, "--cores", "2", *WARM, "all", overlay=OVERLAY), "the biphone run")
    return ws


def test_the_biphone_tree_sets_the_outputs_and_the_graphs(workdir):
    from paravg.export.final_mdl import read_final_mdl
    from paravg.gmm.tree_io import read_tree

    r = workdir / "results"
    chain_info = json.loads((r / "egs/chain/info.json").read_text())
    num_pdfs = chain_info["num_pdfs"]
    assert chain_info["tree"] == "biphone" and 2 * 40 < num_pdfs <= NUM_LEAVES, chain_info
    _tree, width, central = read_tree(r / "egs/chain/tree")
    assert (width, central) == (2, 1)
    init = json.loads((workdir / EXP / "init.json").read_text())
    assert init["num_targets"] == num_pdfs
    diags = sorted((workdir / EXP / "diag").glob("*.json"), key=lambda p: int(p.stem))
    first, last = (json.loads(p.read_text()) for p in (diags[0], diags[-1]))
    assert len(diags) >= 3 and last["valid"]["failed_minibatches"] == 0, last
    assert last["train"]["chain_objf"] > first["train"]["chain_objf"], (first, last)
    for kind in ("chain_words", "chain_phones"):
        graph = json.loads((r / "graph" / kind / "graph.json").read_text())
        assert graph["topology"] == "chain" and graph["num_pdfs"] == num_pdfs, graph
        opts = graph["options"]
        assert (opts["context_width"], opts["central_position"]) == (2, 1), graph
    scores = json.loads((workdir / EXP / "decode" / "test" / "scores.json").read_text())
    assert 0 <= scores["wer"] <= 100 and scores["per"] is not None, scores
    am = read_final_mdl(workdir / EXP / "kaldi" / "am" / "final.mdl")
    assert am.nnet.output_dim() == num_pdfs and len(am.priors) == 0


def test_vosk_decodes_the_biphone_export_like_paravgs_network(workdir):
    """test_chain.py's vosk check on the biphone model: the trained model without its
    i-vector input, exported with dither 0, decoded by vosk and by Kaldi's FasterDecoder
    on paravg's chain output at acoustic scale 1; the transition-id → pdf map from
    Kaldi's TransitionModel of the graph's lang with the biphone tree (context width 2
    in the HCLG vosk reads)."""
    import numpy as np

    from paravg.audio import AudioReader
    from paravg.corpus.phones import PHONES
    from paravg.data import read_data_dir
    from paravg.export.phone_loop import transition_ids
    from paravg.export.stage import export_experiment
    from paravg.export.transition_model import TransitionModel
    from paravg.export.verify import paravg_loglikes, reference_decode, vosk_decode
    from paravg.features import MfccOptions, compute_mfcc
    from paravg.graph.chain_tree import chain_tree_transition_model
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import tid_to_pdf
    from paravg.nnet.model_file import build_model, load_model_file

    from .vosk_checks import (
        assert_agreement,
        decoded_wavs,
        ivector_files,
        record_agreement,
        set_search_beams_of_paravgs_decoding,
        utterances,
        without_ivector_input,
    )

    r = workdir / "results"
    model_path = without_ivector_input(workdir, workdir / EXP / "final.pt")
    graph = r / "graph" / "chain_words"
    kaldi = workdir / "kaldi_biphone_no_ivector_input"
    export_experiment(model_path, kaldi, {"dither": 0.0}, 16000, ivector_files(r),
                      graph_dir=graph, acoustic_scale=1.0)  # fmt: skip
    lang = graph / "lang"
    tm = chain_tree_transition_model(
        read_lang(lang), (lang / "topo").read_text(), r / "egs/chain/tree", PHONES
    )[1]
    tid2pdf = tid_to_pdf(tm)[1:]
    exported = TransitionModel.from_file(kaldi / "am" / "final.mdl")
    got = np.array([pdf for row in transition_ids(exported) for _t, _d, pdf in row])
    assert np.array_equal(got, tid2pdf), "the exported transition model is not Kaldi's"
    model = build_model(load_model_file(model_path)).eval()
    reader = AudioReader(read_data_dir(r / "data" / "test"), 16000)
    utts = utterances(workdir)
    iv = np.zeros((1, model.ivector_dim), np.float32) if model.ivector_dim else None
    feats = {u: compute_mfcc(reader(u), MfccOptions(dither=0.0)) for u in utts}
    ll = {u: paravg_loglikes(model, feats[u], iv, 10**9) for u in utts}
    ours = reference_decode(ll, tid2pdf, graph / "HCLG.fst", graph / "words.txt", 1.0)
    set_search_beams_of_paravgs_decoding(kaldi)
    vosk = vosk_decode(kaldi, decoded_wavs(workdir))
    stats = record_agreement(workdir, "biphone_no_ivector_input", ours, vosk)
    assert_agreement(stats)


def test_chain_experiments_with_different_trees_stop_at_start_up(clone_upstream):
    """Two chain experiments share chain_den: a monophone and a biphone one stop
    ``snakemake -n`` before any job, naming both and the keys."""
    ws = clone_upstream("chain_two_trees")
    overlay = {**OVERLAY, "experiments": {"bi": BIPHONE, "mono": CHAIN}}
    proc = run_snakemake(ws, "-n", "--cores", "1", overlay=overlay)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "share the chain tree (chain_den): ['bi', 'mono']" in proc.stdout, proc.stdout[-3000:]
