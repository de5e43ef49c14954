"""Chain training (``model.objective: chain``, docs/chain.md) through the DAG on the tiny
config: the chain egs (the egs cut into 30-frame chunks, each with its supervision cut
from its utterance's), the den graph from the train set's targets, the chain TDNN-F
(output without softmax, output-xent branch) trained by N averaged NG-SGD jobs at frame
subsampling 3, and diagnostics that print the chain objective, which improves.

The run's ``all`` target then evaluates the chain model on its chain objective, decodes it
on the chain graphs (self-loop scale 1.0, acoustic scale 1.0, lattices × 10) and exports
it as Kaldi's chain models are (no softmax, no priors, vosk's chain ``model.conf``), and
vosk decodes that export as Kaldi's FasterDecoder decodes paravg's network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import (
    CHAIN,
    CHAIN_EGS,
    WARM,
    catch_sleeping_job,
    check_ok,
    run_snakemake,
    snakemake_command,
)

pytestmark = pytest.mark.pipeline

# the chain egs of the shared chain_upstream workspace (conftest.CHAIN_EGS: 4 archives)
OVERLAY = {"egs": CHAIN_EGS, "experiments": {"chain": CHAIN}}
EXP = Path("results/exp/chain")
LAST = 8  # the model after iteration 7, the first of two jobs (of 13 iterations)
KILLED = 12  # the model after iteration 11, the last but one (two jobs): the resume test's


@pytest.fixture(scope="module")
def workdir(clone_chain_upstream) -> Path:
    ws = clone_chain_upstream("chain")
    targets = [str(EXP / "diag" / f"{t}.json") for t in (0, LAST)]
    proc = run_snakemake(ws, "--cores", "2", *WARM, *targets, "all", overlay=OVERLAY)
    check_ok(proc, "the chain run and its all target")
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
    jobs = [p for p in (workdir / EXP).glob("*/job*.json") if int(p.parent.name) <= LAST]
    assert len(jobs) == LAST + 1 and len(list((workdir / EXP / str(LAST)).glob("job*.json"))) == 2
    for path in jobs:
        stats = json.loads(path.read_text())
        assert stats["chain"]["failed_minibatches"] == 0 and stats["num_minibatches"] > 0
        assert stats["objf"] == stats["chain"]["chain_objf"] < 0
    # the diagnostics print the chain objective
    log = (workdir / "logs" / "diagnostics" / "chain" / f"{LAST}.log").read_text()
    assert "valid_diag: chain objective" in log


def test_all_evaluates_decodes_and_exports_the_chain_model_as_kaldi_does(workdir):
    r = workdir / "results"
    # evaluation: the chain objective of each test utterance's supervision, no frame
    # accuracy (its pdfs are not the targets); the results table says n/a
    ev = json.loads((workdir / EXP / "eval" / "test.json").read_text())
    assert ev["objective"] == "chain" and ev["frame_accuracy"] is None, ev
    # the tiny run's phone LM (1.5 min of speech) lacks some phone n-gram of every test
    # utterance: no supervision the den graph allows (nnet3-chain-get-egs skips such
    # utterances), so no chain objective either, and the JSON says why
    assert ev["utterances"] + len(ev["skipped_no_den_path"]) == 20, ev
    if ev["utterances"]:
        assert ev["chain_objf"] < 0 and not ev["failed_utterances"], ev
    else:
        assert ev["chain_objf"] is None and "valid_diag" in ev["not_scored"], ev
    table = (r / "results.md").read_text()
    assert "| chain | test | n/a | n/a |" in table and "chain objective" in table, table
    # the chain graphs: the chain topology, pdfs 2k / 2k + 1, mkgraph.sh's chain scales
    for kind in ("chain_words", "chain_phones"):
        graph = json.loads((r / "graph" / kind / "graph.json").read_text())
        assert graph["topology"] == "chain" and graph["num_pdfs"] == 2 * 40, graph
        assert graph["options"]["self_loop_scale"] == 1.0, graph
        assert "<Tuples>" in (r / "graph" / kind / "transition.mdl").read_text()
    # decoding: acwt 1.0, lattices × 10 (post-decode-acwt), every third frame; scored
    split = json.loads((workdir / EXP / "decode" / "test" / "split0.json").read_text())
    assert split["objective"] == "chain" and split["frame_subsampling_factor"] == 3, split
    assert split["search_acoustic_scale"] == 1.0 and split["post_decode_acwt"] == 10.0
    scores = json.loads((workdir / EXP / "decode" / "test" / "scores.json").read_text())
    assert 0 <= scores["wer"] <= 100 and scores["per"] is not None, scores
    # the export: Kaldi's chain final.mdl (no log-softmax, no priors), vosk's model.conf
    from paravg.export.final_mdl import read_final_mdl

    kaldi = workdir / EXP / "kaldi"
    am = read_final_mdl(kaldi / "am" / "final.mdl")
    assert len(am.priors) == 0 and am.nnet.output_dim() == 2 * 40
    assert not any("log-softmax" in line for line in am.nnet.config_lines)
    conf = (kaldi / "conf" / "model.conf").read_text().split()
    assert "--acoustic-scale=1" in conf and "--frame-subsampling-factor=3" in conf, conf
    assert (kaldi / "graph" / "HCLG.fst").read_bytes() == (
        r / "graph" / "chain_words" / "HCLG.fst"
    ).read_bytes()


def test_vosk_decodes_the_chain_export_like_paravgs_network(workdir):
    """As the TDNN's and TDNN-F's tests (tests/pipeline/test_vosk.py, test_tdnnf.py): the
    trained chain model without its i-vector input, exported with dither 0, decoded by
    vosk and by Kaldi's FasterDecoder on paravg's chain output (no priors, every third
    frame) at the export's acoustic scale 1, graph scale 0.9 (vosk's); the transition-id
    → pdf map from Kaldi's own TransitionModel of the chain graph's lang."""
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import chain_transition_model, tid_to_pdf

    from .vosk_checks import assert_agreement, decode_chain_network_both, record_agreement

    graph = workdir / "results" / "graph" / "chain_words"
    tid2pdf = tid_to_pdf(chain_transition_model(read_lang(graph / "lang"))[2])[1:]
    name = "chain_no_ivector_input"
    ours, vosk = decode_chain_network_both(workdir, workdir / EXP / "final.pt", name, tid2pdf)
    assert_agreement(record_agreement(workdir, name, ours, vosk))
    words = set((graph / "words.txt").read_text().split()[::2])
    assert all(set(h.split()) <= words for h in vosk.values()) and any(vosk.values())


def test_chain_training_sigkilled_mid_run_resumes_to_the_same_final_model(workdir, tmp_path):
    """As the cross-entropy test (tests/pipeline/test_failures.py), from a copy of the
    finished chain run whose iterations from 11 on (of 13) are deleted (models, syncs,
    diagnostics, combination): job 1 of iteration 11, made slow (``simulate.straggler``,
    timing only), is SIGKILLed while it sleeps after training, with snakemake itself (a
    lost session); after ``--unlock`` the same command (Snakemake's own executor, a fresh
    interpreter per job) finishes the run (iterations 11 and 12, the combination),
    rewriting nothing before iteration 11, and ``final.pt`` is bit-identical to the
    uninterrupted run's (the warm executor's). Iteration 11 rather than an earlier one:
    the rerun's jobs each start an interpreter (~4 s), and the resume is the same from
    any iteration of two jobs."""
    import os
    import shutil
    import signal
    import subprocess

    from .conftest import copy_workspace

    ws = copy_workspace(workdir, tmp_path / "ws")
    exp = ws / EXP
    before = {p: p.stat().st_mtime_ns for p in exp.rglob("*.pt")}
    # the run from iteration 11 on: its models, syncs and diagnostics, the combination
    # (Snakemake rebuilds a deleted iteration model only where a target needs it)
    for path in [*exp.iterdir(), *(exp / "diag").iterdir(), *(exp / "sync").iterdir()]:
        stem = path.name.split(".")[0]
        if (stem.isdigit() and int(stem) >= KILLED) or stem in ("combined", "combine", "final"):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    # sleeps 19 x its training time (~0.5 s) after training: time enough to find it, and
    # the same command reruns it, sleep included
    straggler = {"simulate": {"straggler": {"job": 1, "factor": 20.0, "iteration": KILLED - 1}}}
    overlay = {**OVERLAY, **straggler}
    final = str(EXP / "final.pt")
    log_file = ws / "logs" / "train_job" / "chain" / str(KILLED) / "job1.log"
    log_file.unlink(missing_ok=True)
    cmd = [*snakemake_command(ws, overlay), "--cores", "2", "--rerun-incomplete", final]
    proc = subprocess.Popen(cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    pid = catch_sleeping_job(proc, log_file)
    if pid:
        os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate(timeout=60)[0]
    assert pid, "did not catch the chain training job:\n" + out[-3000:]
    assert not (exp / str(KILLED) / "job1.pt").exists(), "no half-written job model"
    check_ok(run_snakemake(ws, "--unlock", overlay=overlay), "--unlock")
    rerun = run_snakemake(ws, "--cores", "2", "--rerun-incomplete", final, overlay=overlay)
    check_ok(rerun, "the chain run after the kill")
    for path, mtime in before.items():
        if path.parent == exp and path.stem.isdigit() and int(path.stem) < KILLED:
            assert path.stat().st_mtime_ns == mtime, f"{path} was rewritten"
    assert (ws / final).read_bytes() == (workdir / final).read_bytes()


def test_vosk_decodes_the_chain_export_like_paravgs_decoder(workdir, tmp_path):
    """The model as trained, i-vectors included (vosk computes its own, from its own
    dithered features), against paravg's decoding at the LMWT scoring chose (WIP 0):
    paravg's lattices hold 10 × the acoustic costs (post-decode-acwt), so its LMWT L is
    acoustic scale 10 / L of a graph cost, and vosk (graph scale 0.9) gets acoustic scale
    0.9 · 10 / L: 0.9 at the decoding scale L = 10, what the export's 1.0 is with vosk's
    graph scale. Measured on the tiny model (WER ~95 %, barely trained): 14/20 identical,
    WER 95.24 on both sides (the cross-entropy TDNN's test_vosk: 14/20)."""
    from .vosk_checks import against_paravgs_decoding

    post = json.loads((workdir / EXP / "decode/test/split0.json").read_text())["post_decode_acwt"]
    stats, wer, _ = against_paravgs_decoding(
        workdir, workdir / EXP, tmp_path, "chain_with_ivectors", post
    )
    assert stats["identical_fraction"] >= 0.6, stats
    assert abs(wer["paravg"] - wer["vosk"]) <= 2.0, wer


# two more chain experiments: a decentralized method and BMUF, 2 jobs throughout, half the
# chain experiment's epochs: 5 iterations (measured: valid_diag chain objective −1.027 →
# −0.841 (ring), −0.873 (bmuf); at 0.5 epochs, 10 iterations, −0.749 and −0.746)
SYNC = {
    f"chain_{m.replace('-', '_')}": {
        **CHAIN,
        "trainer": {
            **CHAIN["trainer"],
            "num_jobs_initial": 2,
            "num_jobs_final": 2,
            "num_epochs": 0.84,  # int(0.84 · 12) = 10 archives, 5 iterations of 2 jobs
        },
        "sync": {"method": m},
    }
    for m in ("ring", "bmuf")
}


def test_chain_trains_with_a_decentralized_method_and_bmuf(workdir):
    """The chain experiment's copies with sync.method ring (every learner starts from
    its ring neighbours' average; the final model their consensus) and bmuf (block
    momentum over the jobs' summed displacement), 2 jobs per iteration for 5 iterations,
    trained in the same workspace (its chain egs and den graph reused) to final.pt: each
    method's own nodes ran, and the chain objective on valid_diag improves as the
    averaged one does."""
    overlay = {**OVERLAY, "experiments": {**OVERLAY["experiments"], **SYNC}}
    targets = [f"results/exp/{e}/final.pt" for e in SYNC]
    check_ok(run_snakemake(workdir, "--cores", "2", *WARM, *targets, overlay=overlay), "sync")
    logs = workdir / "logs"
    assert list((logs / "consensus" / "chain_ring").iterdir())
    assert list((logs / "bmuf" / "chain_bmuf").iterdir())
    for exp in SYNC:
        diags = sorted((workdir / "results/exp" / exp / "diag").glob("*.json"),
                       key=lambda p: int(p.stem))  # fmt: skip
        first, last = (json.loads(p.read_text()) for p in (diags[0], diags[-1]))
        assert last["valid"]["chain_objf"] > first["valid"]["chain_objf"] + 0.1, (exp, last)
        assert last["valid"]["failed_minibatches"] == 0
        for job in (workdir / "results/exp" / exp).glob("*/job*.json"):
            assert "chain" in json.loads(job.read_text()), job


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"graph": {"source": "lang", "lang_dir": "l", "lm": "G.fst", "final_mdl": "m"}},
            "graph.source lang's graph is made for its final_mdl's pdfs, not the chain tree's",
        ),
    ],
    ids=["users-graph"],
)
def test_a_chain_config_that_cannot_decode_or_train_stops_at_start_up(
    clone_upstream, extra, message
):
    """A chain experiment with a user's graph (made for their GMM's pdfs) while decoding:
    snakemake stops before any job, naming the experiment and the key (chain experiments
    on GMM targets train on the alignments' phones: test_chain_gmm.py)."""
    ws = clone_upstream("chain_bad_config")
    proc = run_snakemake(ws, "-n", "--cores", "1", overlay={**OVERLAY, **extra})
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert message in proc.stdout and "['chain']" in proc.stdout, proc.stdout[-3000:]
