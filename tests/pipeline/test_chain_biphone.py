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
