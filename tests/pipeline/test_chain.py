"""Chain training (``model.objective: chain``, docs/chain.md) through the DAG on the tiny
config: the chain egs (the egs cut into 30-frame chunks, each with its supervision cut
from its utterance's), the den graph from the train set's targets, the chain TDNN-F
(output without softmax, output-xent branch) trained by N averaged NG-SGD jobs at frame
subsampling 3, and diagnostics that print the chain objective, which improves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

CHAIN = {
    "model": {
        "family": "tdnnf",
        "input_splice": [-1, 0, 1],
        "frame_subsampling_factor": 3,
        "objective": "chain",
        "tdnnf": {
            "tdnn1_dim": 32,
            "dim": 32,
            "bottleneck_dim": 8,
            "time_strides": [1, 0, 1],
            "linear_dim": 8,
            "prefinal_big_dim": 32,
            "prefinal_small_dim": 16,
        },
    },
    "trainer": {"minibatch_size": 32},
}
# chain egs: 30 input frames (10 outputs) per eg; 120 x 30 frames per archive: 4 archives
OVERLAY = {"egs": {"frames_per_eg": 30, "samples_per_iter": 120}, "experiments": {"chain": CHAIN}}
EXP = Path("results/exp/chain")
LAST = 8  # the model after iteration 7, the first of two jobs


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("chain")
    targets = [str(EXP / "diag" / f"{t}.json") for t in (0, LAST)]
    check_ok(run_snakemake(ws, "--cores", "2", *WARM, *targets, overlay=OVERLAY), "the chain run")
    return ws


def test_chain_training_improves_the_chain_objective_through_the_dag(workdir):
    chain_info = json.loads((workdir / "results/egs/chain/info.json").read_text())
    egs_info = json.loads((workdir / "results/egs/info.json").read_text())
    # the monophone chain tree: a forward and a self-loop pdf per phone; the network has
    # as many outputs
    assert chain_info["num_pdfs"] == 2 * egs_info["num_targets"], chain_info
    init = json.loads((workdir / EXP / "init.json").read_text())
    assert init["num_targets"] == chain_info["num_pdfs"]
    first, last = (
        json.loads((workdir / EXP / "diag" / f"{t}.json").read_text()) for t in (0, LAST)
    )
    for d in (first, last):
        for subset in ("valid", "train"):
            assert d[subset]["frames"] > 0 and d[subset]["failed_minibatches"] == 0, d
    assert last["valid"]["chain_objf"] > first["valid"]["chain_objf"] + 0.1, (first, last)
    assert last["train"]["chain_objf"] > first["train"]["chain_objf"] + 0.1, (first, last)
    assert last["valid"]["xent_objf"] > first["valid"]["xent_objf"], (first, last)
    # every job trained on the chain objective (N jobs averaged: two at the last
    # iteration), with the supervision of every eg of its archive
    jobs = sorted((workdir / EXP).glob("*/job*.json"))
    assert len(jobs) == LAST + 1 and len(list((workdir / EXP / str(LAST)).glob("job*.json"))) == 2
    for path in jobs:
        stats = json.loads(path.read_text())
        assert stats["chain"]["failed_minibatches"] == 0 and stats["num_minibatches"] > 0
        assert stats["objf"] == stats["chain"]["chain_objf"] < 0
    # the diagnostics print the chain objective
    log = (workdir / "logs" / "diagnostics" / "chain" / f"{LAST}.log").read_text()
    assert "valid_diag: chain objective" in log
