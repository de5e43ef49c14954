"""Live view of training runs: figures from whatever iterations have finished.

    python -m paravg.progress results/exp/default [results/exp/other ...] --out progress/
    python -m paravg.progress results/exp/* --out progress/ --config config/config.yaml --watch 60

Reads only the per-iteration JSON files (written atomically, so a file that exists is
complete); files that do not exist yet are simply not drawn, a partially finished
iteration shows the jobs that have finished (marked "sync not run yet"). Writes, under
``--out``: ``<exp>/<figure>.png`` per experiment, ``comparison.png`` and ``results.html``
across experiments, and ``index.html`` showing them all (it reloads itself while
``--watch`` runs). Prints one status line per experiment.

With ``--config`` (the config file(s) of the run, as given to Snakemake) and the egs
written (``<results>/egs/info.json``), the planned schedule is drawn too and the status
says how many iterations remain. This never writes into the experiment directories and
can run beside Snakemake at any time.
"""

from __future__ import annotations

import argparse
import html
import logging
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import yaml

from paravg.io import read_json, write_text_atomic
from paravg.layout import Layout
from paravg.plan import PlannedSchedule
from paravg.plots import FIGURES, series
from paravg.plots.compare import write_comparison
from paravg.plots.figures import write_experiment_figures
from paravg.plots.runs import ExperimentRun, load_run

log = logging.getLogger(__name__)


def load_config(paths: Sequence[str | Path | dict]) -> dict:
    """Merge config files in order (later ones override, as Snakemake's ``--configfile``);
    a dict in the list is merged as it is (an overlay a benchmark writes)."""
    from paravg.config import deep_merge, validate_config

    config: dict = {}
    for p in paths:
        if isinstance(p, dict):
            config = deep_merge(config, p)
            continue
        with open(p) as f:
            config = deep_merge(config, yaml.safe_load(f) or {})
    return validate_config(config)


def schedule_for(exp_dir: Path, config: dict | None) -> PlannedSchedule | None:
    """The experiment's planned schedule (paravg.plan) when the config names it and the egs
    exist, else None."""
    if config is None:
        return None
    from paravg.plan import experiment_plans

    name = exp_dir.name
    if name not in config.get("experiments", {}):
        log.warning("%s: experiment %r is not in the config; no planned schedule", exp_dir, name)
        return None
    info_path = Path(Layout.from_exp_dir(exp_dir).egs_info())
    if not info_path.is_file():
        return None
    try:
        return experiment_plans(config, read_json(info_path))[name].planned()
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("%s: no planned schedule (%s)", exp_dir, exc)
        return None


def status_line(run: ExperimentRun, schedule: PlannedSchedule | None = None) -> str:
    """One line: iterations done, the running iteration's jobs, last diagnostics, final."""
    done = len(run.completed_iterations)
    total = f"/{schedule.num_iters}" if schedule else ""
    parts = [f"{run.name}: {done}{total} iterations synced"]
    running = [t for t in run.jobs if t not in run.syncs]
    if running:
        t = min(running)
        expected = f"/{schedule.num_jobs(t)}" if schedule and t < schedule.num_iters else ""
        parts.append(f"iteration {t}: {len(run.jobs[t])}{expected} jobs finished")
    if run.diags:
        last = max(run.diags)
        c = series.diagnostic_curves(run)
        i = c.model.index(last)
        lp, acc = c.valid_logprob[i], c.valid_accuracy[i]
        if not math.isnan(lp):
            parts.append(f"model {last}: valid {lp:.3f} nats/frame, accuracy {100 * acc:.1f}%")
    rejected = series.run_summary(run).jobs_rejected
    if rejected:
        parts.append(f"{rejected} jobs rejected")
    if run.finished:
        evals = ", ".join(
            f"{s} {100 * e['frame_accuracy']:.1f}%"
            for s, e in sorted(run.evals.items())
            if isinstance(e.get("frame_accuracy"), int | float)
        )
        parts.append("finished" + (f" (eval accuracy: {evals})" if evals else ""))
    if run.problems:
        parts.append(f"{len(run.problems)} unreadable files skipped")
    return "; ".join(parts)


def _index_html(runs: Sequence[ExperimentRun], statuses: Sequence[str], refresh: int | None) -> str:
    meta = f"<meta http-equiv='refresh' content='{refresh}'>" if refresh else ""
    out = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'>{meta}<title>paravg progress"
        "</title><style>body{font-family:sans-serif;margin:1.5em}img{max-width:100%;"
        "border:1px solid #ddd;margin:0.4em 0}</style></head><body><h1>paravg progress</h1>",
        f"<p>Rendered {html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}.</p><ul>",
    ]
    out += [f"<li>{html.escape(s)}</li>" for s in statuses]
    out.append("</ul>")
    if len(runs) > 1:
        out.append(
            "<h2>Comparison</h2><img src='comparison.png'>"
            "<p><a href='results.html'>results table</a></p>"
        )
    for run in runs:
        out.append(f"<h2>{html.escape(run.name)}</h2>")
        out += [
            f"<img src='{html.escape(run.name)}/{name}.png' alt='{html.escape(label)}'>"
            for name, label in FIGURES.items()
        ]
    out.append("</body></html>\n")
    return "".join(out)


def render_progress(
    exp_dirs: Sequence[str | Path],
    out_dir: str | Path,
    config: dict | None = None,
    refresh: int | None = None,
) -> list[ExperimentRun]:
    """Draw every figure of every experiment from the files present now; return the runs."""
    out_dir = Path(out_dir)
    runs, statuses = [], []
    for d in exp_dirs:
        d = Path(d)
        run = load_run(d, strict=False)
        schedule = schedule_for(d, config)
        write_experiment_figures(run, out_dir / run.name, schedule)
        runs.append(run)
        statuses.append(status_line(run, schedule))
    eval_sets = sorted({s for run in runs for s in run.evals})
    if len(runs) > 1:
        write_comparison(runs, eval_sets, out_dir / "comparison.png", out_dir / "results.html")
    if all(run.finished for run in runs):
        refresh = None  # nothing will change any more
    write_text_atomic(out_dir / "index.html", _index_html(runs, statuses, refresh))
    for line in statuses:
        print(line, flush=True)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m paravg.progress",
        description="Render training figures from the finished iterations of running experiments.",
    )
    parser.add_argument("exp_dirs", nargs="+", type=Path, help="results/exp/<experiment> dirs")
    parser.add_argument(
        "--out", type=Path, default=Path("progress"), help="output directory (default: progress/)"
    )
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="YAML",
        help="config file(s) of the run, in Snakemake's order, for the planned "
        "schedule (repeatable)",
    )
    parser.add_argument(
        "--watch",
        type=float,
        default=0,
        metavar="SECONDS",
        help="re-render every SECONDS until every experiment has final.json",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    missing = [str(d) for d in args.exp_dirs if not d.is_dir()]
    if missing and not args.watch:
        parser.error(f"no such experiment directory: {', '.join(missing)}")
    for d in args.exp_dirs:
        try:
            Layout.from_exp_dir(d)  # its files are read through the run's layout
        except ValueError as exc:
            parser.error(str(exc))
    config = load_config(args.config) if args.config else None
    refresh = max(int(args.watch), 1) if args.watch else None
    try:
        while True:
            runs = render_progress(args.exp_dirs, args.out, config, refresh)
            if not args.watch or all(run.finished for run in runs):
                break
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 130
    print(f"figures in {args.out}/ (open {args.out / 'index.html'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
