"""Declared resources that are true, and the start-up warning of settings that do not scale.

Each upstream rule's ``mem_mb`` and ``runtime`` formula (paravg/resources.py, through the
Dag, which reads the job's share of the corpus from the workspace's reports) is checked
against what its jobs measured (the resource line each job's log ends with,
paravg/logs.py) at two corpus sizes: the shared tiny upstream workspace (1.5 minutes of
demo audio, jobs forked from paravg-warm) and one of 4.5 minutes (1.4x the training
audio: the demo's sets do not grow in proportion at these sizes) built here with
Snakemake's local executor (a fresh interpreter per job) and the PCA and UBM on a subset
of 40 utterances (``ivector.ubm_subset_utts``, rule ``ubm_subset``). ``mem_mb`` must hold
the job's peak and not be absurdly above it (at most 20 x the peak + the formula's base);
``runtime`` must hold the job's CPU time. A dry run whose schedule passes 5,000
iterations prints the plan's warning once, naming the option and the figure. The
benchmark-size check (hours of audio) is ``benchmarks/bench_data_scale.py``, which prints
each rule's declared figures beside the measured ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from paravg.config import deep_merge, validate_config
from paravg.dag import Dag
from paravg.logs import read_job_resources
from paravg.resources import BASE_MB, GMM_RULES, JOB_SHARE
from tests.pipeline.conftest import REPO, TINY, check_ok, run_snakemake, tiny_plan

pytestmark = pytest.mark.pipeline

#: The upstream rules with a formula that every workspace runs (ubm_subset: the larger;
#: the GMM stage's: tests/pipeline/test_gmm_targets.py).
RULES = tuple(r for r in JOB_SHARE if r != "ubm_subset" and r not in GMM_RULES)
LARGER = {"demo": {"minutes": 4.5}, "ivector": {"ubm_subset_utts": 40}}


def workspace_dag(ws: Path, overlay: dict | None = None) -> Dag:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg = deep_merge(cfg, yaml.safe_load(TINY.read_text()))
    cfg = validate_config(deep_merge(cfg, overlay or {}))
    return Dag({**cfg, "results": str(ws / "results")})


@pytest.fixture(scope="module")
def larger(tmp_path_factory) -> Path:
    """The upstream stages (egs_all) at 3x the tiny config's demo minutes, fresh
    interpreters."""
    ws = tmp_path_factory.mktemp("larger") / "ws"
    ws.mkdir()
    proc = run_snakemake(ws, "--cores", "2", "egs_all", overlay=LARGER)
    check_ok(proc, "the upstream stages at 4.5 minutes of demo audio")
    return ws


def job_measures(ws: Path, rule: str) -> list[tuple[str, dict]]:
    """(log file stem, resource line) of every job of ``rule``."""
    logs = sorted((ws / "logs" / rule).glob("*.log"))
    assert logs, f"no logs of {rule} in {ws / 'logs'}"
    measures = [(p.stem, read_job_resources(p)) for p in logs]
    assert all(m for _, m in measures), f"a {rule} log has no resource line"
    return measures


def check_declared(dag: Dag, ws: Path, rule: str) -> None:
    for stem, measured in job_measures(ws, rule):
        set_ = stem.split(".")[0] if JOB_SHARE[rule][0] == "set" else None
        declared, minutes = dag.mem_mb(rule, set_), dag.runtime(rule, set_)
        peak = measured["max_rss_mb"]
        assert peak <= declared <= 20 * peak + BASE_MB, (rule, stem, peak, declared)
        assert measured["cpu_s"] <= 60 * minutes, (rule, stem, measured["cpu_s"], minutes)


@pytest.mark.parametrize("rule", RULES)
def test_the_declared_resources_hold_the_tiny_jobs(upstream, rule):
    check_declared(workspace_dag(upstream), upstream, rule)


@pytest.mark.parametrize("rule", [*RULES, "ubm_subset"])
def test_the_declared_resources_hold_a_larger_corpus_with_a_ubm_subset(larger, upstream, rule):
    dag = workspace_dag(larger, LARGER)
    check_declared(dag, larger, rule)
    if rule in ("egs", "merge_features", "prepare_data"):  # a line per utterance held
        small = workspace_dag(upstream).job_data(rule, "train")
        big = dag.job_data(rule, "train")  # the formula's input, from each report.json
        assert big.utterances > 1.3 * small.utterances and big.hours > 1.3 * small.hours


def test_the_ubm_subset_trains_the_ubm_on_its_utterances_only(larger):
    """ubm_subset's 40 utterances are what the PCA and UBM read; the extractor all."""
    subset = (larger / "results" / "ivector" / "ubm_subset" / "feats.scp").read_text()
    whole = (larger / "results" / "feats" / "train" / "feats.scp").read_text()
    assert len(subset.splitlines()) == 40 < len(whole.splitlines())
    assert set(subset.splitlines()) < set(whole.splitlines())
    pca_log = (larger / "logs" / "ivector_pca" / "pca.log").read_text()
    assert "'utterances': 40" in pca_log


def test_a_dry_run_past_5000_iterations_warns_once_naming_the_setting(clone_upstream):
    ws = clone_upstream("warn")
    overlay = {"trainer": {"num_epochs": 200}}
    iters = tiny_plan(ws, overlay).num_iters
    assert iters > 5000
    proc = run_snakemake(ws, "-n", overlay=overlay)
    check_ok(proc, "a dry run with a 200-epoch schedule")
    lines = [ln for ln in proc.stdout.splitlines() if "more than 5,000" in ln]
    assert len(lines) == 1, proc.stdout[-3000:]
    assert f"{iters:,} iterations" in lines[0] and "egs.samples_per_iter = 300" in lines[0]
