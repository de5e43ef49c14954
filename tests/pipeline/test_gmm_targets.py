"""data.targets: gmm through Snakemake on the tiny config: the GMM stages (lang, per-job
features, monophone EM, tree, triphone EM, alignment of every set) make the per-frame
targets, and the network trains and evaluates on the tree's pdfs.

A clone of the shared upstream workspace (its demo corpus is reused; every set is
re-prepared from the GMM stage's targets, so its features and egs are rebuilt).
I-vectors are off: this test's subject is the targets.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from paravg.gmm.stages import mix_up_target
from paravg.kaldi_io import load_scp
from paravg.logs import read_job_resources
from paravg.resources import BASE_MB, GMM_RULES, JOB_SHARE

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

MONO_ITERS, TRI_ITERS, NJ = 6, 5, 2
OVERLAY = {
    "data": {"targets": "gmm"},
    "ivector": {"enabled": False},
    "gmm": {
        "nj": NJ,
        "mono": {"num_iters": MONO_ITERS, "totgauss": 200, "max_iter_inc": 4,
                 "realign_iters": [1, 2, 4]},
        "tri": {"num_leaves": 80, "tot_gauss": 300, "num_iters": TRI_ITERS, "max_iter_inc": 3,
                "realign_iters": [3]},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("gmm_targets")
    proc = run_snakemake(ws, "--cores", "2", *WARM, overlay=OVERLAY)
    check_ok(proc, "the tiny run on GMM targets")
    ws.joinpath("run.log").write_text(proc.stdout)
    return ws


def _logged(path: Path, rule: str) -> dict:
    line = next(x for x in path.read_text().splitlines() if f" {rule}: " in x)
    return json.loads(line.split(f" {rule}: ", 1)[1])


def _alignments(workdir: Path, set_: str) -> tuple[int, list[str]]:
    """(utterances aligned, utterances whose alignment failed) of a set's final alignment."""
    logged = [
        _logged(workdir / "logs" / "gmm_align_set" / set_ / f"{j}.log", "gmm_align_set")
        for j in range(1, NJ + 1)
    ]
    return sum(x["aligned"] for x in logged), [u for x in logged for u in x["failed"]]


def test_the_network_outputs_are_the_trees_pdfs(workdir):
    gmm = workdir / "results" / "gmm"
    num_pdfs = int((gmm / "tri" / "num_pdfs").read_text())
    tree = _logged(workdir / "logs" / "gmm_tree" / "tri.log", "gmm_tree")
    assert num_pdfs == tree["num_pdfs"] > 40  # context-dependent: more than the 40 phones
    info = json.loads((workdir / "results" / "egs" / "info.json").read_text())
    assert info["num_targets"] == num_pdfs
    final = torch.load(workdir / "results/exp/default/final.pt", weights_only=False)
    assert final["num_targets"] == num_pdfs
    # every set's targets are the final triphone alignment's pdfs, one per frame of its
    # features (merge_features checked the lengths)
    for set_ in ("train", "test"):
        targets = load_scp(workdir / "results" / "data" / set_ / "targets.scp")
        pdfs = np.concatenate([np.asarray(targets[u]) for u in targets])
        assert pdfs.min() >= 0 and pdfs.max() < num_pdfs
        report = json.loads((workdir / "results" / "data" / set_ / "report.json").read_text())
        assert report["targets_source"].endswith(f"results/gmm/data/{set_}/targets.ark")
        # an utterance whose alignment failed has no targets: counted, as Kaldi drops it
        assert report["num_missing_targets"] == len(_alignments(workdir, set_)[1])
    # trained and evaluated on them
    assert "| default | test |" in (workdir / "results" / "results.md").read_text()


def test_it_decodes_with_the_gmm_graph_and_exports_the_triphone_model(workdir):
    """The word graph is H (the triphone transition model) ∘ C (the tree's context) ∘ L ∘
    G; the decoder scores the test set on it and the export's final.mdl carries that
    transition model, whose pdfs are the network's outputs."""
    from paravg.export.final_mdl import read_final_mdl
    from paravg.gmm.model import GmmModel

    graph = json.loads((workdir / "results/graph/words/graph.json").read_text())
    num_pdfs = int((workdir / "results/gmm/tri/num_pdfs").read_text())
    assert graph["source"] == "gmm" and graph["num_pdfs"] == num_pdfs
    assert (graph["context_width"], graph["central_position"]) == (3, 1)
    scores = json.loads((workdir / "results/exp/default/decode/test/scores.json").read_text())
    assert scores  # scored (the tiny model's WER itself is not the subject)
    assert not (workdir / "results/graph/phones").exists()  # no phone graph: pdf targets
    final = read_final_mdl(workdir / "results/exp/default/kaldi/am/final.mdl")
    tri = GmmModel.load(workdir / f"results/gmm/tri/{TRI_ITERS}.mdl")
    assert final.transition_model.num_pdfs == num_pdfs == tri.num_pdfs
    assert len(final.transition_model.tuples) == len(tri.trans.tuples)


def test_each_em_iteration_is_a_fan_in_of_its_jobs_accumulators(workdir):
    logs, gmm = workdir / "logs", workdir / "results" / "gmm"
    for sys, first, num_iters in (("mono", 0, MONO_ITERS), ("tri", 1, TRI_ITERS)):
        for x in range(first, num_iters):
            for j in range(1, NJ + 1):
                # the accumulators' chunk temporaries mapped, off the heap (paravg.malloc)
                log = (logs / "gmm_acc" / sys / f"{x}.{j}.log").read_text()
                assert "malloc: mmap threshold fixed at 131072 bytes" in log
                assert not (gmm / sys / f"{x}.{j}.acc").exists()  # temp: removed
            assert (gmm / sys / f"{x + 1}.mdl").is_file()
    realigned = sorted(p.name for p in (logs / "gmm_realign" / "mono").iterdir())
    assert realigned == ["1.1.log", "1.2.log", "2.1.log", "2.2.log", "4.1.log", "4.2.log"]
    # EM raises the likelihood: mono from its equal alignment, tri from its first estimate
    mono = [_logged(logs / "gmm_est" / "mono" / f"{y}.log", "gmm_est")
            for y in range(1, MONO_ITERS + 1)]  # fmt: skip
    assert mono[-1]["avg_like"] > mono[0]["avg_like"] + 5
    assert mono[-1]["num_gauss"] > mono[0]["num_gauss"]  # mixed up toward totgauss
    tri = [_logged(logs / "gmm_est" / "tri" / f"{y}.log", "gmm_est")
           for y in range(2, TRI_ITERS + 1)]  # fmt: skip
    assert tri[-1]["avg_like"] > tri[0]["avg_like"]
    # train_deltas.sh's integer schedule: 80 + (300 - 80) // 3 per iteration, 3 times
    assert tri[-1]["num_gauss"] == mix_up_target(80, 300, 3, TRI_ITERS - 1) == 299
    # align_si with the final model: at most what the data stage accepts fails (the tiny
    # system, 6 + 5 iterations on a minute of audio, lost one test utterance of 20)
    for set_ in ("train", "test"):
        aligned, failed = _alignments(workdir, set_)
        assert aligned > 0 and len(failed) <= 0.05 * (aligned + len(failed)), failed


def _granted(run_log: str) -> dict[str, tuple[str, int, int]]:
    """Per job's log (relative to the workspace): (rule, mem_mb, runtime) that Snakemake
    gave it, from the run's job blocks."""
    granted = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", run_log):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        log = re.search(r"^\s+log: (\S+)$", block, re.M)
        res = re.search(r"^\s+resources: .*$", block, re.M)
        if rule and log and res:
            mem, minutes = (re.search(rf"\b{k}=(\d+)", res[0]) for k in ("mem_mb", "runtime"))
            granted[log[1]] = (rule[1], int(mem[1]), int(minutes[1]))
    return granted


def test_every_gmm_job_holds_in_the_resources_its_rule_declares(workdir, monkeypatch):
    """Every GMM job's measured peak RSS and CPU time (its log's resource line) are within
    the mem_mb and runtime of paravg/resources.py's formulas (what Snakemake gave the job:
    rules/gmm.smk wires them), and mem_mb is not absurdly above the peak (at most 20 x
    the peak + the base), as tests/pipeline/test_resources.py checks the other rules."""
    from tests.pipeline.test_resources import workspace_dag

    monkeypatch.chdir(workdir)  # the run's config: results relative to the workspace
    dag = workspace_dag(Path("."), OVERLAY)
    granted = _granted((workdir / "run.log").read_text())
    for rule in GMM_RULES:
        logs = sorted((workdir / "logs" / rule).rglob("*.log"))
        if rule == "gmm_phones":  # chain experiments only
            assert not logs
            continue
        assert logs, f"no logs of {rule}"
        for log in logs:
            measured = read_job_resources(log)
            assert measured, f"{log} has no resource line"
            stem = log.relative_to(workdir / "logs" / rule).with_suffix("")
            set_ = stem.parts[0] if JOB_SHARE[rule][0] == "set" else None
            declared, minutes = dag.mem_mb(rule, set_), dag.runtime(rule, set_)
            peak = measured["max_rss_mb"]
            assert peak <= declared <= 20 * peak + BASE_MB, (rule, str(stem), peak, declared)
            assert measured["cpu_s"] <= 60 * minutes, (rule, str(stem), measured, minutes)
            got = granted[str(log.relative_to(workdir))]
            assert got == (rule, declared, minutes), (str(stem), got)


def test_vosk_decodes_the_gmm_path_export_like_paravgs_decoder(workdir, tmp_path):
    """The export (triphone transition model, the GMM graph) in vosk: its best path at
    acoustic scale 0.9 / LMWT equals paravg's at that LMWT (WIP 0), on every other test
    utterance (sorted ids: 10 utterances, every voice; vosk's search on the tiny model's
    flat scores costs ~9 s an utterance here). The two differ only where their features'
    dither noise or their pruning (a lattice rescored at LMWT against vosk's direct search)
    tips a near tie: measured on the tiny model (no i-vectors, WER ~99 %, hypotheses of 0-2
    words) on all 19-20 test utterances, 19/20 and 19/19 identical, the same WER. So at
    least 60 % identical, and the WERs at most 3 words apart (the 2.0 points of the ~180
    reference words of all the test utterances this test once decoded)."""
    from .vosk_checks import against_paravgs_decoding, reference_text

    r = workdir / "results"
    stats, wer, vosk = against_paravgs_decoding(
        workdir, r / "exp/default", tmp_path, "gmm", every=2
    )
    assert stats["utterances"] == len(vosk) >= 10, stats
    assert stats["identical_fraction"] >= 0.6, stats
    ref_words = sum(len(reference_text(workdir)[u]) for u in vosk)
    errors_apart = round(abs(wer["paravg"] - wer["vosk"]) * ref_words / 100)  # an integer
    assert errors_apart <= 3, (wer, ref_words)
    words = set((r / "graph/words/words.txt").read_text().split()[::2])
    assert any(vosk.values()) and all(set(h.split()) <= words for h in vosk.values())
