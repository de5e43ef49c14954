"""Declared resources that are true, and the start-up warning of settings that do not scale.

Each upstream rule's ``mem_mb`` formula (paravg/resources.py, through the Dag) is checked
against the peak its jobs measured in the shared upstream workspace (``max_rss_mb`` of the
resource line each job's log ends with, paravg/logs.py): at least the peak, and not
absurdly above it (at most 20 x the peak + the formula's base). A dry run whose schedule
passes 5,000 iterations prints the plan's warning once, naming the option and the figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from paravg.config import deep_merge, validate_config
from paravg.dag import Dag
from paravg.logs import read_job_resources
from paravg.resources import BASE_MB
from tests.pipeline.conftest import REPO, TINY, check_ok, run_snakemake, tiny_plan

pytestmark = pytest.mark.pipeline

RULES = (
    "ubm_init",
    "ubm_gselect",
    "ubm_acc",
    "extractor_post",
    "extractor_acc",
    "egs_split",
    "egs_archive",
)


def tiny_dag(ws: Path) -> Dag:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg = validate_config(deep_merge(cfg, yaml.safe_load(TINY.read_text())))
    return Dag({**cfg, "results": str(ws / "results")})


def measured_peak_mb(ws: Path, rule: str) -> float:
    """The largest ``max_rss_mb`` of the rule's job logs."""
    logs = sorted((ws / "logs" / rule).glob("*.log"))
    assert logs, f"no logs of {rule} in {ws / 'logs'}"
    peaks = [read_job_resources(p) for p in logs]
    assert all(peaks), f"a {rule} log has no resource line"
    return max(p["max_rss_mb"] for p in peaks)


@pytest.mark.parametrize("rule", RULES)
def test_the_declared_mem_mb_holds_the_measured_peak(upstream, rule):
    declared = tiny_dag(upstream).mem_mb(rule)
    peak = measured_peak_mb(upstream, rule)
    assert peak <= declared <= 20 * peak + BASE_MB, (rule, peak, declared)


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
