"""Figures are written as valid PNGs, draw the JSON's numbers, and the tables match eval JSON."""

import dataclasses
import json
import math

import numpy as np
import pytest
import yaml
from matplotlib.image import imread
from plots_synth import JOBS, planned_schedule, write_run

from paravg.plots import FIGURES, figures
from paravg.plots.compare import (
    comparison_rows,
    format_comparison_html,
    format_comparison_markdown,
    plot_comparison,
)
from paravg.plots.config_view import experiment_config_html, experiment_config_yaml
from paravg.plots.outputs import (
    comparison,
    experiment_config,
    experiment_figures,
    schedule_from_params,
)
from paravg.plots.runs import load_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SCHED = planned_schedule()  # the plan's: 4 archives of 8 frames, 1.5 epochs, jobs 1 -> 4


def assert_png(path):
    assert path.read_bytes()[:8] == PNG_SIGNATURE, path
    pixels = imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 300 and pixels.shape[1] > 600
    assert pixels.std() > 0.05  # something is drawn, not a blank canvas


def read(path):
    return json.loads(path.read_text())


@pytest.mark.parametrize("which", ["full", "half", "empty"])
def test_every_figure_is_a_valid_png(which, full_run, half_run, tmp_path):
    exp = {"full": full_run, "half": half_run, "empty": tmp_path / "exp" / "nothing"}[which]
    out = tmp_path / "figs"
    written = figures.write_experiment_figures(load_run(exp), out, SCHED)
    assert set(written) == set(FIGURES)
    for name, path in written.items():
        assert path == out / f"{name}.png"
        assert_png(path)
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no temporaries


def test_objective_figure_draws_the_diag_json(full_run):
    fig = figures.plot_objective(load_run(full_run))
    ax_lp, ax_acc = fig.axes
    (train, valid) = ax_lp.lines[:2]
    (train_acc, valid_acc) = ax_acc.lines[:2]
    for t in range(len(JOBS) + 1):
        d = read(full_run / "diag" / f"{t}.json")
        assert train.get_xdata()[t] == t
        assert train.get_ydata()[t] == d["train"]["logprob"]
        assert valid.get_ydata()[t] == d["valid"]["logprob"]
        assert train_acc.get_ydata()[t] == pytest.approx(100 * d["train"]["accuracy"])
        assert valid_acc.get_ydata()[t] == pytest.approx(100 * d["valid"]["accuracy"])
    assert "nats/frame" in ax_lp.get_ylabel()
    assert [t.get_text() for t in ax_lp.get_legend().get_texts()] == [
        "train subset",
        "validation (held-out)",
    ]
    assert "default" in fig._suptitle.get_text()


def test_job_objective_figure_marks_rejected_and_diverged_jobs(full_run):
    fig = figures.plot_job_objectives(load_run(full_run))
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"accepted ({sum(JOBS) - 2})" in labels
    assert any(lbl.startswith("rejected by the sync (1)") for lbl in labels)
    assert "no usable objective (1)" in labels
    # the accepted scatter holds exactly the accepted jobs' objectives
    accepted = []
    for t in range(len(JOBS)):
        sync = read(full_run / "sync" / f"{t + 1}.json")
        accepted += [
            (t, read(full_run / str(t + 1) / f"job{j}.json")["objf"]) for j in sync["accepted"]
        ]
    offsets = [c.get_offsets() for c in ax.collections if c.get_label().startswith("accepted")]
    assert sorted(map(tuple, offsets[0].tolist())) == sorted(accepted)


def test_max_change_figure_in_percent(full_run):
    fig = figures.plot_max_change(load_run(full_run))
    (ax,) = fig.axes
    lines = {line.get_label(): line for line in ax.lines}
    for t, _ in enumerate(JOBS):
        job0 = read(full_run / str(t + 1) / "job0.json")
        if JOBS[t] == 1:
            assert lines["tdnn1.affine"].get_ydata()[t] == pytest.approx(
                100 * job0["max_change_per_component"]["tdnn1.affine"]
            )
            assert lines["whole model (max-param-change)"].get_ydata()[t] == pytest.approx(
                100 * job0["max_change_global"]
            )
    assert "1 update skipped" in ax.get_title(loc="left")


def test_parameter_change_figure_is_log_scale_in_network_order(full_run):
    fig = figures.plot_parameter_change(load_run(full_run))
    ax_rel, ax_abs = fig.axes
    assert ax_rel.get_yscale() == "log" and ax_abs.get_yscale() == "log"
    assert [line.get_label() for line in ax_rel.lines] == [
        "tdnn1.affine",
        "tdnn2.affine",
        "output.affine",
    ]
    out = ax_rel.lines[2]
    assert math.isnan(out.get_ydata()[0])  # output layer starts at zero: no relative change
    t = 5
    d = read(full_run / "diag" / f"{t}.json")
    assert out.get_ydata()[t - 1] == d["progress"]["output.affine"]["relative_change"]


def test_schedule_figure_has_run_and_plan(half_run):
    fig = figures.plot_schedule(load_run(half_run), SCHED)
    ax_lr, _ = fig.axes
    labels = {line.get_label(): line for line in ax_lr.lines}
    assert ax_lr.get_yscale() == "log"
    assert list(labels["per-job lr, planned"].get_ydata()) == [
        SCHED.learning_rate(t) for t in range(SCHED.num_iters)
    ]
    lr8 = read(half_run / "9" / "job0.json")["lr"]
    assert labels["per-job lr (job JSON)"].get_ydata()[8] == pytest.approx(lr8)
    effective = labels["effective lr = per-job lr / (N · sync factor)"].get_ydata()
    assert effective[8] == pytest.approx(lr8 * SCHED.effective_lrate(8) / SCHED.learning_rate(8))
    # without the plan the sync method's factor is unknown: no effective line is drawn
    unplanned = figures.plot_schedule(load_run(half_run)).axes[0]
    assert [line.get_label() for line in unplanned.lines] == ["per-job lr (job JSON)"]
    assert "in progress: 8 iterations done" in fig._suptitle.get_text()


def test_write_subset_and_unknown_figure(full_run, tmp_path):
    run = load_run(full_run)
    written = figures.write_experiment_figures(run, {"schedule": tmp_path / "a" / "s.png"})
    assert list(written) == ["schedule"] and (tmp_path / "a" / "s.png").is_file()
    with pytest.raises(ValueError, match="unknown figure"):
        figures.write_experiment_figures(run, {"loss": tmp_path / "x.png"})


def test_figures_entry_point_of_the_rule(full_run, tmp_path):
    outputs = {name: tmp_path / "report" / f"{name}.png" for name in FIGURES}
    written = experiment_figures(
        full_run, outputs, name="default", schedule_params=dataclasses.asdict(SCHED)
    )
    assert set(written) == set(FIGURES)
    (full_run / "diag" / "4.json").write_text("{")
    with pytest.raises(ValueError, match=r"4\.json"):  # the rule's inputs must be complete
        experiment_figures(full_run, outputs)


def test_schedule_round_trip_through_params():
    assert schedule_from_params(dataclasses.asdict(SCHED)) == SCHED
    assert schedule_from_params(None) is None


# ----------------------------------------------------------------- comparison
@pytest.fixture
def two_runs(tmp_path):
    a = write_run(tmp_path / "exp" / "ngsgd", JOBS, quality=0.2, eval_sets=("test", "dev"))
    b = write_run(tmp_path / "exp" / "sgd", JOBS, seed=4, eval_sets=("test", "dev"))
    return [load_run(a), load_run(b)]


def test_comparison_rows_equal_eval_json(two_runs):
    table = comparison_rows(two_runs, ["test", "dev"])
    assert list(table) == ["test", "dev"]
    for s, rows in table.items():
        assert [r.experiment for r in rows] == ["ngsgd", "sgd"]
        for r, run in zip(rows, two_runs, strict=True):
            ev = read(run.path / "eval" / f"{s}.json")
            assert r.frame_accuracy == ev["frame_accuracy"]
            assert r.cross_entropy == ev["cross_entropy"]
            assert r.frames == ev["frames"] and r.utterances == ev["utterances"]
            last = read(run.path / "diag" / f"{len(JOBS)}.json")
            assert r.valid_logprob == last["valid"]["logprob"]
            assert r.combined_models == 3 and r.iterations == len(JOBS)


def test_comparison_tables_mark_the_best(two_runs):
    table = comparison_rows(two_runs, ["test"])
    md = format_comparison_markdown(table)
    best_acc = f"**{100 * table['test'][0].frame_accuracy:.2f}**"
    assert best_acc in md  # ngsgd has the higher accuracy ...
    assert f"**{table['test'][0].cross_entropy:.4f}**" in md  # ... and the lower cross-entropy
    assert md.count("| ngsgd |") == 1 and "### eval set `test`" in md
    page = format_comparison_html(table)
    assert page.startswith("<!DOCTYPE html>") and "class='best'" in page
    assert "<script" not in page


def test_comparison_with_an_unfinished_experiment(two_runs, half_run, tmp_path):
    runs = [*two_runs, load_run(half_run)]
    table = comparison_rows(runs, ["test"])
    unfinished = table["test"][2]
    assert math.isnan(unfinished.frame_accuracy) and unfinished.iterations == 8
    assert "| running | – |" in format_comparison_markdown(table)
    fig = plot_comparison(runs)
    assert len(fig.axes) == 4
    # the data-processed axis of each run is Σ jobs of the iterations before each model
    x = fig.axes[1].lines[0].get_xdata()
    assert list(x[:4]) == [0, 1, 2, 4]


def test_comparison_entry_point(two_runs, tmp_path):
    out = tmp_path / "report"
    comparison(
        {r.name: r.path for r in two_runs},
        ["test", "dev"],
        out / "comparison.png",
        out / "results.html",
        out / "results_by_set.md",
    )
    assert_png(out / "comparison.png")
    assert "eval set <code>dev</code>" in (out / "results.html").read_text()
    assert "### eval set `dev`" in (out / "results_by_set.md").read_text()


# ----------------------------------------------------------------- config
def test_experiment_config_views(tmp_path):
    resolved = {
        "model": {"hidden": [{"dim": 32, "splice": [0]}]},
        "trainer": {"num_jobs_initial": 1, "ngsgd": {"enabled": False}},
        "sync": {"method": "average"},
        "ivector_enabled": True,
    }
    overrides = {"trainer": {"ngsgd": {"enabled": False}}}
    doc = yaml.safe_load(experiment_config_yaml("sgd<&>", resolved, overrides))
    assert doc["experiment"] == "sgd<&>" and doc["overrides"] == overrides
    assert doc["trainer"] == resolved["trainer"] and doc["ivector_enabled"] is True
    page = experiment_config_html("sgd<&>", resolved, overrides)
    assert "sgd&lt;&amp;&gt;" in page and "sgd<&>" not in page
    experiment_config(
        "sgd", resolved, None, tmp_path / "c.yaml", tmp_path / "c.html", dataclasses.asdict(SCHED)
    )
    doc = yaml.safe_load((tmp_path / "c.yaml").read_text())
    assert doc["overrides"] == {} and doc["schedule"]["num_iters"] == SCHED.num_iters
    assert doc["schedule"]["models_to_combine"] == SCHED.models_to_combine()
    assert "Schedule" in (tmp_path / "c.html").read_text()


def test_png_bytes_are_reproducible(full_run, tmp_path):
    run = load_run(full_run)
    a = figures.save_png(figures.plot_objective(run), tmp_path / "a.png").read_bytes()
    b = figures.save_png(figures.plot_objective(run), tmp_path / "b.png").read_bytes()
    assert a == b
    assert np.array_equal(imread(tmp_path / "a.png"), imread(tmp_path / "b.png"))


def test_max_change_never_active_is_said_and_zoomed(tmp_path):
    exp = write_run(tmp_path / "exp" / "calm", [1, 2, 2])
    for p in exp.glob("*/job*.json"):
        job = json.loads(p.read_text())
        job["max_change_per_component"] = dict.fromkeys(job["max_change_per_component"], 0.0)
        job["max_change_global"] = 0.0
        p.write_text(json.dumps(job))
    (ax,) = figures.plot_max_change(load_run(exp)).axes
    assert ax.get_title(loc="right") == "max-change never activated"
    assert ax.get_ylim()[1] == 5.0


def test_combination_of_one_model_is_named_so(full_run):
    combine = json.loads((full_run / "combine.json").read_text())
    combine["num_models"] = 1
    (full_run / "combine.json").write_text(json.dumps(combine))
    ax_lp = figures.plot_objective(load_run(full_run)).axes[0]
    assert ax_lp.get_title(loc="right").startswith("final: the newest model alone, ")


def test_an_ema_evaluation_gets_its_own_row(two_runs):
    run = two_runs[0]
    (run.path / "eval" / "ema").mkdir()
    ema = {"frame_accuracy": 0.61, "cross_entropy": 1.2, "frames": 1234, "utterances": 17}
    (run.path / "eval" / "ema" / "test.json").write_text(json.dumps(ema))
    runs = [load_run(run.path), two_runs[1]]
    assert runs[0].model_evals == {"ema": {"test": ema}} and set(runs[0].evals) == {"test", "dev"}
    rows = comparison_rows(runs, ["test", "dev"])
    assert [r.experiment for r in rows["test"]] == ["ngsgd", "ngsgd (ema)", "sgd"]
    assert rows["test"][1].frame_accuracy == 0.61
    assert [r.experiment for r in rows["dev"]] == ["ngsgd", "sgd"]
    assert "**61.00**" in format_comparison_markdown(rows)
