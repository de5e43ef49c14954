"""The report on the real tiny pipeline: figures among the default targets, `snakemake --report`.

A clone of the shared trained workspace (``tests/pipeline/tiny.yaml`` with two
experiments, the second one shorter, whose default target ``all`` ran once): the tests
check that every figure, the configs and the comparison were built, that the figures'
numbers are the JSON files' numbers, that ``snakemake --report`` builds one
self-contained HTML file, and that the live progress command draws a copy of the run with
its last iterations removed (a run still in progress). That a finished workspace has
nothing left to do is test_pipeline's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from paravg.plots import FIGURES, series
from paravg.plots.runs import load_run

from .conftest import EXPERIMENTS, TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def is_png(path: Path) -> bool:
    return path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def workdir(clone_trained) -> Path:
    """A clone of the shared trained workspace (default target ``all``, two experiments)."""
    return clone_trained("report")


def test_figures_are_default_targets(workdir):
    results = workdir / "results"
    for exp in EXPERIMENTS:
        for name in FIGURES:
            assert is_png(results / "exp" / exp / "report" / f"{name}.png"), (exp, name)
        config = yaml.safe_load((results / "exp" / exp / "report" / "config.yaml").read_text())
        assert config["experiment"] == exp and config["overrides"] == EXPERIMENTS[exp]
        assert config["schedule"]["num_iters"] == len(
            list((results / "exp" / exp / "sync").glob("*.json"))
        )
        assert "<pre>" in (results / "exp" / exp / "report" / "config.html").read_text()
    assert is_png(results / "report" / "comparison.png")
    table = (results / "report" / "results_by_set.md").read_text()
    assert "### eval set `test`" in table and "| default |" in table and "| short |" in table


def test_figure_data_equal_the_pipeline_json(workdir):
    exp = workdir / "results" / "exp" / "default"
    run = load_run(exp, strict=True)
    curves = series.diagnostic_curves(run)
    for i, t in enumerate(curves.model):
        diag = json.loads((exp / "diag" / f"{t}.json").read_text())
        assert curves.valid_logprob[i] == diag["valid"]["logprob"]
        assert curves.train_accuracy[i] == diag["train"]["accuracy"]
    points = series.job_points(run)
    assert len(points) == sum(
        len(json.loads(p.read_text())["objfs"]) for p in (exp / "sync").glob("*.json")
    )
    sched = series.schedule_series(run)
    for t in sched.iteration:
        job0 = json.loads((exp / str(t + 1) / "job0.json").read_text())
        assert sched.lr[t] == pytest.approx(job0["lr"])
    assert set(series.parameter_change(run).components) == set(job0["max_change_per_component"])


def test_snakemake_report_is_one_self_contained_file(workdir):
    check_ok(run_snakemake(workdir, "--report", "report.html", overlay=TRAINED_OVERLAY), "--report")
    page = (workdir / "report.html").read_text()
    assert len(page) > 100_000  # the figures are embedded
    for text in ("All experiments", "default", "short", "What to look for", "archive-passes"):
        assert text in page, text
    external = re.findall(r"<(?:script|link|img)[^>]+(?:src|href)=[\"']https?://", page)
    assert external == []


def test_progress_on_a_run_cut_short(workdir, tmp_path):
    """The live view on the real files with the last iterations not yet written."""
    src = workdir / "results" / "exp" / "default"
    exp = tmp_path / "results" / "exp" / "default"
    shutil.copytree(src, exp, ignore=shutil.ignore_patterns("*.pt", "report"))
    n = len(list((exp / "sync").glob("*.json")))
    cut = n - 3  # iterations cut .. n-1 not synced; iteration cut has one job finished
    for t in range(cut + 1, n + 1):
        (exp / "sync" / f"{t}.json").unlink()
        (exp / "diag" / f"{t}.json").unlink()
        for job in (exp / str(t)).glob("job*.json"):
            if not (t == cut + 1 and job.name == "job0.json"):
                job.unlink()
    for name in ("combine.json", "final.json"):
        (exp / name).unlink()
    shutil.rmtree(exp / "eval")
    out = tmp_path / "progress"
    proc = subprocess.run(
        [sys.executable, "-m", "paravg.progress", str(exp), "--out", str(out)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout
    assert f"default: {cut} iterations synced; iteration {cut}: 1 jobs finished" in proc.stdout
    for name in FIGURES:
        assert is_png(out / "default" / f"{name}.png")


def test_tensorboard_events_equal_the_diagnostics(workdir):
    """results/tb/<exp>/ holds one event file per experiment, written by the diagnostics
    rule: a step per model 0..num_iters, in order, each once, whose values are
    diag/<t>.json's (float32), and the schedule's and sync's of the iteration before."""
    from paravg.layout import Layout
    from paravg.tensorboard import FILE_VERSION, read_events
    from paravg.training_events import step_scalars

    layout = Layout(str(workdir / "results"))
    for exp in EXPERIMENTS:
        files = list((workdir / "results" / "tb" / exp).glob("*tfevents*"))
        assert [f.name for f in files] == ["events.out.tfevents.paravg"], exp
        events = read_events(files[0])
        assert events[0].file_version == FILE_VERSION
        run = load_run(workdir / "results" / "exp" / exp, strict=True)
        assert [e.step for e in events[1:]] == sorted(run.diags)
        for e in events[1:]:
            d = run.diags[e.step]
            for subset in ("train", "valid"):
                for key in ("logprob", "accuracy"):
                    assert e.scalars[f"{subset}/{key}"] == pytest.approx(
                        d[subset][key], rel=1e-6
                    ), (exp, e.step, subset, key)
            if e.step > 0:
                sync = run.syncs[e.step - 1]
                assert e.scalars["schedule/num_jobs"] == len(sync["objfs"])
                assert e.scalars["sync/accepted"] == len(sync["accepted"])
                lrs = [j["lr"] for j in run.jobs[e.step - 1].values()]
                assert e.scalars["schedule/lr"] == pytest.approx(sum(lrs) / len(lrs), rel=1e-6)
            assert e.scalars == pytest.approx(step_scalars(layout, exp, e.step), rel=1e-6)
