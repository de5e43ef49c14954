"""A chain run with the left-biphone chain tree (``model.chain.tree: biphone``,
docs/chain.md): ``chain_den`` grows the tree from the train set's targets and features
(``build_tree.sh --context-width=2 --central-position=1`` at frame subsampling 3), the
network gets the tree's pdfs as outputs (``<egs>/chain/info.json``, not 2K), a few
iterations train it, and the run evaluates it, decodes it on chain graphs built with that
tree (context width 2, central position 1) and exports it. Kept small: test_chain.py runs
the rest of the chain DAG (``all``, the report) with the monophone tree. Both train on the
shared chain egs (conftest.chain_upstream); the tree, den graph and supervision are this
run's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import CHAIN, CHAIN_EGS, WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

NUM_LEAVES = 150
BIPHONE = {
    **CHAIN,
    # thresh 0: the tiny run's 4,478 subsampled frames pass no split at Kaldi's 300
    "model": {
        **CHAIN["model"],
        "chain": {"tree": "biphone", "num_leaves": NUM_LEAVES, "thresh": 0},
    },
    "trainer": {**CHAIN["trainer"], "num_epochs": 0.67},  # 8 archive reads: 5 iterations
}
OVERLAY = {"egs": CHAIN_EGS, "experiments": {"bi": BIPHONE}}
EXP = Path("results/exp/bi")
# what the tests read (not ``all``: the report, figures and digests are test_chain.py's)
TARGETS = [
    str(EXP / "kaldi"),
    str(EXP / "eval" / "test.json"),
    str(EXP / "decode" / "test" / "scores.json"),
    "results/graph/chain_phones/graph.json",
]


@pytest.fixture(scope="module")
def workdir(clone_chain_upstream) -> Path:
    ws = clone_chain_upstream("chain_biphone")
    proc = run_snakemake(ws, "--cores", "2", *WARM, *TARGETS, overlay=OVERLAY)
    check_ok(proc, "the biphone run")
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
    # evaluation on the chain objective checks the network's outputs against the tree's
    # pdfs: every test utterance scored, or skipped for want of a den-graph path
    ev = json.loads((workdir / EXP / "eval" / "test.json").read_text())
    assert ev["objective"] == "chain" and ev["frame_accuracy"] is None, ev
    assert ev["utterances"] + len(ev["skipped_no_den_path"]) == 20, ev
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
    from paravg.corpus.phones import PHONES
    from paravg.graph.chain_tree import chain_tree_transition_model
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import tid_to_pdf

    from .vosk_checks import assert_agreement, decode_chain_network_both, record_agreement

    lang = workdir / "results" / "graph" / "chain_words" / "lang"
    tree = workdir / "results" / "egs" / "chain" / "tree"
    tm = chain_tree_transition_model(read_lang(lang), (lang / "topo").read_text(), tree, PHONES)
    name = "biphone_no_ivector_input"
    ours, vosk = decode_chain_network_both(
        workdir, workdir / EXP / "final.pt", name, tid_to_pdf(tm[1])[1:]
    )
    assert_agreement(record_agreement(workdir, name, ours, vosk))


def test_chain_experiments_with_different_trees_stop_at_start_up(clone_upstream):
    """Two chain experiments share chain_den: a monophone and a biphone one stop
    ``snakemake -n`` before any job, naming both and the keys."""
    ws = clone_upstream("chain_two_trees")
    overlay = {**OVERLAY, "experiments": {"bi": BIPHONE, "mono": CHAIN}}
    proc = run_snakemake(ws, "-n", "--cores", "1", overlay=overlay)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "share the chain tree (chain_den): ['bi', 'mono']" in proc.stdout, proc.stdout[-3000:]
