"""The real Snakefile: lint, dry-runs (default config, Kaldi scale), and the shared tiny
trained workspace end to end for two experiments sharing the upstream stages: its outputs,
and which jobs each later change of config plans (a partial rerun after a killed job is
tests/pipeline/test_failures.py's)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import pytest

from paravg.nnet.model_file import load_model_file

from .conftest import EXPERIMENTS, REPO, SNAKEMAKE, check_ok, run_snakemake, tiny_schedule

pytestmark = pytest.mark.pipeline


def planned_jobs(output: str) -> list[tuple[str, str]]:
    """(rule, output files) of every job a dry-run lists."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?(?:rule|checkpoint) )", output):
        m = re.match(r"(?:local)?(?:rule|checkpoint) (\w+):", block)
        if m:
            out = re.search(r"output: (.*)", block)
            jobs.append((m.group(1), out.group(1) if out else ""))
    return jobs


def test_lint_is_clean(tmp_path):
    proc = run_snakemake(tmp_path, "--lint")
    check_ok(proc, "snakemake --lint")
    assert "Lints for" not in proc.stdout, proc.stdout[-4000:]


def test_default_config_dry_run(tmp_path):
    import subprocess

    proc = subprocess.run(
        [
            SNAKEMAKE,
            "-s",
            str(REPO / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "--cores",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    check_ok(proc, "default dry-run")
    rules = {r for r, _ in planned_jobs(proc.stdout)}
    assert {"demo_corpus", "prepare_data", "compute_features", "egs"} <= rules
    assert "checkpoint" in proc.stdout


@pytest.fixture(scope="module")
def workspace(clone_trained) -> Path:
    """A clone of the shared trained workspace: the tiny pipeline's ``all``, two
    experiments from shared egs."""
    return clone_trained("pipeline")


def test_end_to_end_outputs(workspace):
    exp = workspace / "results" / "exp"
    for name in EXPERIMENTS:
        sched = tiny_schedule(workspace, {"experiments": EXPERIMENTS}, name)
        final = load_model_file(exp / name / "final.pt")
        priors = final["state_dict"]["log_priors"].exp()
        assert priors.sum().item() == pytest.approx(1.0, abs=1e-4)
        result = json.loads((exp / name / "eval" / "test.json").read_text())
        assert 0.0 < result["frame_accuracy"] <= 1.0 and result["cross_entropy"] > 0
        # chance on the demo is about 0.08 (majority class): a trained model beats it
        assert result["frame_accuracy"] > 0.15
        for t in range(sched.num_iters):
            jobs = sorted((exp / name / str(t + 1)).glob("job*.json"))
            assert len(jobs) == sched.num_jobs(t)
            stats = json.loads(jobs[0].read_text())
            assert stats["lr"] == pytest.approx(sched.learning_rate(t))
        assert (exp / name / "diag" / f"{sched.num_iters}.json").exists()
    table = (workspace / "results" / "results.md").read_text()
    assert all(f"| {name} | test |" in table for name in EXPERIMENTS)
    # the export's model.conf carries the deployment beams of the config's export section
    conf = (exp / "default" / "kaldi" / "conf" / "model.conf").read_text().split()
    assert {"--beam=10", "--lattice-beam=3", "--max-active=2000"} <= set(conf), conf


def test_every_run_writes_its_stage_digests_beside_the_results_table(workspace):
    """Issue 23: a digest per stage, so two runs show where they part."""
    from paravg.cpu_kernels import pin_cpu_kernels
    from paravg.digests import stage_digest

    results = workspace / "results"
    written = json.loads((results / "digests.json").read_text())
    # the Snakefile pinned the CPU kernels where this environment sets none (a workplace
    # may set OPENBLAS_CORETYPE), and the jobs inherited the pins
    assert written["cpu_kernels"] == pin_cpu_kernels(dict(os.environ))
    digests = written["stages"]
    stages = ["corpus (demo)", "data/train", "data/test", "features/train", "features/test",
              "i-vector models", "i-vectors/train", "i-vectors/test", "egs"]  # fmt: skip
    for name in EXPERIMENTS:
        stages += [f"{name}: final.pt", f"{name}: scores"]
    assert sorted(digests) == sorted(stages)
    assert all(d["files"] > 0 for d in digests.values()), digests
    assert digests["default: final.pt"] == stage_digest([results / "exp/default/final.pt"], results)
    assert digests["default: scores"]["files"] == 2  # eval/test.json, decode/test/scores.json
    table = (results / "digests.md").read_text()
    assert f"| egs | {digests['egs']['files']} | `{digests['egs']['sha256'][:16]}` |" in table


def test_decoding_gives_wer_and_per_in_the_results_table(workspace):
    """The tiny run decodes the test set on the demo graphs and scores it (issue 12)."""
    for name in EXPERIMENTS:
        scores = json.loads(
            (workspace / "results" / "exp" / name / "decode" / "test" / "scores.json").read_text()
        )
        assert scores["wer"] >= 0.0 and scores["wer_details"]["ref_tokens"] > 0
        assert scores["per"] >= 0.0 and scores["per_details"]["ref_tokens"] > 0
        assert scores["wer_setting"] == "10_0" and scores["oov"]["count"] == 0
        assert scores["grids"]["phones"]["lmwts"] == list(range(1, 11))  # TIMIT's grid
        assert 1 <= scores["per_lmwt"] <= 10
    header, _, *rows = (workspace / "results" / "results.md").read_text().splitlines()
    assert "WER % (LMWT/WIP)" in header and "PER % (LMWT/WIP)" in header
    assert all("(10/0)" in row for row in rows), rows
    assert (workspace / "results" / "graph" / "words" / "HCLG.fst").stat().st_size > 0


def test_decoding_leaves_lattices_hypotheses_and_a_ctm(workspace):
    """Issue 22: one search per utterance and graph, its lattices on disk in Kaldi's text
    archive form; every setting's hypotheses; the chosen setting's words with times."""
    from paravg.decode.lattice import read_lattice_archive

    decode = workspace / "results" / "exp" / "default" / "decode" / "test"
    utts = set((workspace / "results" / "data" / "test" / "utt2spk").read_text().split()[::2])
    for sub in ("", "phones/"):
        keys = [k for j in range(2) for k, _ in read_lattice_archive(decode / f"{sub}lat.{j}.gz")]
        assert sorted(keys) == sorted(utts)
    split = json.loads((decode / "split0.json").read_text())
    assert split["searches_per_utterance"] == 2  # the word and the phone graph, once each
    hyps = json.loads((decode / "hyps.json").read_text())
    assert set(hyps["words"]) == {"10_0"} and set(hyps["words"]["10_0"]) == utts
    assert set(hyps["phones"]) == {f"{lm}_0" for lm in range(1, 11)}
    # the CTM (get_ctm_conf.sh): the MBR words of the chosen setting, word-aligned, in
    # order without overlaps (test_determinized_lattices.py checks the words against the
    # best path's with decode.ctm_decode_mbr false)
    scores = json.loads((decode / "scores.json").read_text())
    assert scores["ctm"]["setting"] == "10_0" and scores["ctm"]["decode_mbr"] is True
    assert scores["ctm"]["not_word_aligned"] == 0
    ctm = [line.split() for line in (decode / "ctm").read_text().splitlines()]
    words_txt = workspace / "results" / "graph" / "words" / "words.txt"
    vocabulary = set(words_txt.read_text().split()[::2])
    assert ctm and {f[0] for f in ctm} <= utts
    end = {}
    for utt, channel, start, duration, word, confidence in ctm:
        assert channel == "1" and word in vocabulary
        # start and duration are each rounded to 10 ms: a word's printed end may pass the
        # next word's printed start by up to one unit
        assert float(start) >= end.get(utt, 0.0) - 0.01 - 1e-9 and float(duration) >= 0
        assert 0 <= float(confidence) <= 1
        end[utt] = float(start) + float(duration)


def test_a_new_scoring_grid_rescores_the_lattices_without_searching(workspace):
    """Changing the LMWT or WIP grid reruns scoring (and what reads the scores), never
    the search."""
    overlay = {
        "experiments": EXPERIMENTS,
        "decode": {"lmwt_min": 9, "lmwt_max": 11, "word_ins_penalties": [0.0, 0.5]},
    }
    plan = run_snakemake(workspace, "-n", "--cores", "2", overlay=overlay)
    check_ok(plan, "dry-run after a grid change")
    rules = [r for r, _ in planned_jobs(plan.stdout)]
    assert rules.count("score") == len(EXPERIMENTS), rules
    assert "decode_split" not in rules and not set(rules) & {"train_job", "evaluate"}, rules


def test_nothing_to_do_when_finished(workspace):
    proc = run_snakemake(workspace, "-n", "--cores", "2", overlay={"experiments": EXPERIMENTS})
    check_ok(proc, "dry-run of a finished run")
    assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]


def test_unrelated_config_change_does_not_retrain(workspace):
    """Rerun triggers: a key that only the end of the pipeline reads reruns only that end."""
    overlay = {"experiments": EXPERIMENTS, "combine": {"max_objective_evaluations": 3}}
    plan = run_snakemake(workspace, "-n", "--cores", "2", overlay=overlay)
    check_ok(plan, "dry-run after a combine-only change")
    rules = {r for r, _ in planned_jobs(plan.stdout)}
    assert "combine" in rules
    assert not rules & {"train_job", "average", "init_model", "diagnostics", "egs"}, rules


def test_per_utterance_eval_ivectors_reextract_the_eval_set_only(workspace):
    """ivector.eval_per_utt changes the eval set's i-vectors and what reads them
    (evaluation, decoding), never the training set's, the egs or the models."""
    overlay = {"experiments": EXPERIMENTS, "ivector": {"eval_per_utt": True}}
    plan = run_snakemake(workspace, "-n", "--cores", "2", overlay=overlay)
    check_ok(plan, "dry-run with per-utterance eval i-vectors")
    jobs = planned_jobs(plan.stdout)
    rules = {r for r, _ in jobs}
    assert {"extract_ivectors", "evaluate", "decode_split"} <= rules, rules
    assert not rules & {"train_job", "average", "init_model", "egs", "ubm_est"}, rules
    extracted = [out for r, out in jobs if r == "extract_ivectors"]
    assert extracted and all("/ivector/test/" in out for out in extracted), extracted


def test_trainer_change_after_training_stops_or_retrains(workspace):
    """Editing what workspace iterations computed never continues with models of two configs:
    the run stops naming the change, or retrains from the first iteration it affects."""
    changed = {**EXPERIMENTS, "default": {"trainer": {"max_param_change": 1.0}}}
    proc = run_snakemake(workspace, "-n", "--cores", "2", overlay={"experiments": changed})
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "max_param_change: 2.0 -> 1.0" in proc.stdout, proc.stdout[-3000:]
    assert "on_plan_change: retrain" in proc.stdout
    overlay = {"experiments": changed, "run": {"on_plan_change": "retrain"}}
    plan = run_snakemake(workspace, "-n", "--cores", "2", overlay=overlay)
    check_ok(plan, "dry-run of the retraining")
    trains = [out for r, out in planned_jobs(plan.stdout) if r == "train_job"]
    sched = tiny_schedule(workspace, {"experiments": changed})
    assert len(trains) == sum(sched.jobs_per_iter), trains  # all of default, from iteration 0
    assert all("/default/" in out for out in trains), "the other experiment must not retrain"


def test_a_cluster_jobs_dag_is_the_job_alone(workspace):
    """What the SLURM executor runs on the node for one training job builds a DAG of that
    job only: the history before it is finished input (paravg.resume), however long."""
    sched = tiny_schedule(workspace, {"experiments": EXPERIMENTS})
    t = sched.num_iters
    proc = run_snakemake(
        workspace,
        "--target-jobs",
        f"train_job:exp=default,t={t},j=0",
        "--allowed-rules",
        "train_job",
        "--force",
        "--nolock",
        "-n",
        "--cores",
        "1",
        overlay={"experiments": EXPERIMENTS},
    )
    check_ok(proc, "the node's dry-run")
    assert [r for r, _ in planned_jobs(proc.stdout)] == ["train_job"], proc.stdout[-3000:]


def test_dag_builds_at_kaldi_scale(clone_upstream):
    """2,500 iterations x 12 jobs: the DAG holds the first block of ~run.block_jobs train
    jobs and the chain of block checkpoints (the rest is expanded block by block)."""
    ws = clone_upstream("scale")
    info_path = ws / "results" / "egs" / "info.json"
    info = json.loads(info_path.read_text())
    info["num_archives"] = 100
    info_path.write_text(json.dumps(info))
    # 37.5 epochs x 100 archives x 8 frames x 2 / (12 + 12) = 2,500 iterations
    overlay = {"trainer": {"num_epochs": 37.5, "num_jobs_initial": 12, "num_jobs_final": 12}}
    started = time.perf_counter()
    proc = run_snakemake(
        ws, "-n", "--quiet", "rules", "--cores", "2", overlay=overlay, timeout_s=600
    )
    elapsed = time.perf_counter() - started
    check_ok(proc, "dry-run at 2,500 x 12")
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M))
    assert int(counts["train_job"]) == 50 * 12, proc.stdout[-2000:]  # H = 600 // 12
    assert int(counts["train_block"]) == 2500 // 50
    assert elapsed < 300
    shutil.rmtree(ws)


def test_a_damaged_export_stops_the_run_and_its_rebuild_is_the_export_alone(workspace):
    """B6: an export missing conf/model.conf got "Nothing to be done"."""
    kaldi = workspace / "results" / "exp" / "default" / "kaldi"
    backup = workspace / "kaldi.backup"
    shutil.copytree(kaldi, backup)
    try:
        (kaldi / "conf" / "model.conf").unlink()
        proc = run_snakemake(workspace, "-n", "--cores", "2", overlay={"experiments": EXPERIMENTS})
        assert proc.returncode != 0, proc.stdout[-3000:]
        assert f"{kaldi.relative_to(workspace)}/conf/model.conf: missing" in proc.stdout
        assert "Traceback" not in proc.stdout and " in file " not in proc.stdout  # one message
        assert f"rm -r {kaldi.relative_to(workspace)}" in proc.stdout
        shutil.rmtree(kaldi)
        plan = run_snakemake(workspace, "-n", "--cores", "2", overlay={"experiments": EXPERIMENTS})
        check_ok(plan, "dry-run after removing the damaged export")
        rules = [r for r, _ in planned_jobs(plan.stdout) if r != "all"]
        assert rules == ["export_kaldi"], plan.stdout[-3000:]
    finally:
        shutil.rmtree(kaldi, ignore_errors=True)
        shutil.move(backup, kaldi)
