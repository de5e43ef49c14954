"""Sync methods under a straggler: wall-clock of the training with one job made slower.

Runs the real Snakefile in a scratch workspace (default ``/tmp/paravg_bench_sync``) on the
demo corpus with ``egs.samples_per_iter`` lowered so the demo has enough archives for
N = 4 jobs. For average, ring, random-ring, delay-by-one and d-psgd, the wall-clock of the
whole training (first train job start → last model of the last iteration: ``<T>.pt`` or
``consensus/<T>.pt``) with job 1 made ``--factor`` times slower (``simulate.straggler``)
against the same run without, and the ratio. Each timed run is its own
``snakemake --cores N --executor E`` command on a fresh experiment (its ``0.pt`` built
beforehand, untimed); runs are interleaved over ``--repeats``. Also printed: when the fast
jobs (all but the straggler) finished their last iteration, which shows how far the DAG
edges let them run ahead of the slow one.

    .venv/bin/python benchmarks/bench_sync.py [--cores 4] [--executor paravg-warm]
        [--epochs 1] [--repeats 1] [--factor 3] [--demo-minutes 20]
        [--methods average,ring,...] [--workdir DIR] [--results DIR]

Every path and number of a run (its iterations, jobs, the synced model of each method,
the files read) comes from its plan (:func:`paravg.plan.experiment_plans`) on the
workspace's config (``config/config.yaml`` and the overlay written here) and egs.

The quality of the methods (equally fast learners, held-out accuracy, the EMA) is
``config/experiments/sync_paper.yaml`` with ``benchmarks/bench_sync_paper.py``. The numbers
are noisy on a shared 2-core machine; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
from datetime import datetime
from pathlib import Path

import _harness
import yaml

from paravg.config import REPO_CONFIG
from paravg.plan import ExperimentPlan

STRAGGLER_METHODS = ["average", "ring", "random-ring", "delay-by-one", "d-psgd"]
SLOW_JOB = 1


def base_overlay(args) -> dict:
    """The demo, with archives small enough for N jobs (the timed experiments are added)."""
    jobs = {"num_jobs_initial": args.jobs, "num_jobs_final": args.jobs}
    overlay = {
        "demo": {"minutes": args.demo_minutes},
        "egs": {"samples_per_iter": args.samples_per_iter},
        "trainer": {**jobs, "num_epochs": args.epochs},
        "decode": {"enabled": False},
        "experiments": {"average": {}},
    }
    if args.results:
        overlay["results"] = args.results
    return overlay


def plan_of(overlay: dict, name: str) -> ExperimentPlan:
    """The plan of experiment ``name`` of the workspace (the current directory) under the
    config ``config/config.yaml`` + ``overlay``, on the egs built there."""
    return _harness.plan_of([REPO_CONFIG, overlay], name)


def snakemake(ws: Path, overlay: dict, *targets: str, cores: int, executor: str) -> float:
    """Run the Snakefile in ``ws`` with the overlay on ``targets``; return wall seconds."""
    cfg = ws / "overlay.yaml"
    cfg.write_text(yaml.safe_dump(overlay))
    args = ["--cores", str(cores), "--executor", executor, *targets]
    return _harness.run_snakemake(ws, args, configfiles=[cfg]).wall


def first_log_time(path: Path) -> float:
    m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)", path.read_text())
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def straggler_run(ws: Path, args, method: str, slow: bool, rep: int) -> dict:
    name = f"strag-{method}-{'slow' if slow else 'none'}-{rep}"
    overlay = base_overlay(args)
    overlay["experiments"] = {name: {"sync": {"method": method}}}
    overlay["simulate"] = {"straggler": {"job": SLOW_JOB if slow else -1, "factor": args.factor}}
    plan = plan_of(overlay, name)
    L, iters = plan.layout, plan.num_iters
    if os.path.exists(L.exp_dir(name)):
        shutil.rmtree(L.exp_dir(name))
    shutil.rmtree(L.log_dir("train_job", name), ignore_errors=True)
    snakemake(ws, overlay, L.init_model(name), cores=args.cores, executor=args.executor)
    last = plan.synced_model(iters)
    wall = snakemake(ws, overlay, last, cores=args.cores, executor=args.executor)
    first_jobs = glob.glob(L.log("train_job", f"{name}/1/*"))  # the jobs of iteration 0
    start = min(first_log_time(Path(p)) for p in first_jobs)
    end = Path(last).stat().st_mtime
    fast = [
        Path(L.job_stats(name, iters, j)).stat().st_mtime - start
        for j in range(plan.num_jobs(iters - 1))
        if j != SLOW_JOB
    ]
    return {"span": end - start, "wall": wall, "fast": statistics.mean(fast)}


def stragglers(ws: Path, args) -> None:
    iters = plan_of(base_overlay(args), "average").num_iters
    results: dict[tuple[str, bool], list[dict]] = {}
    methods = args.methods.split(",")
    for rep in range(args.repeats):
        for m in methods:
            for slow in (False, True):
                r = straggler_run(ws, args, m, slow, rep)
                results.setdefault((m, slow), []).append(r)
                print(
                    f"  {m:13s} straggler={slow!s:5s} rep {rep}: training {r['span']:.1f} s, "
                    f"fast jobs done {r['fast']:.1f} s",
                    flush=True,
                )

    def med(m, slow, key):
        return statistics.median(r[key] for r in results[(m, slow)])

    base = med("average", False, "span")
    print(
        f"\n## Stragglers: job {SLOW_JOB} of {args.jobs} {args.factor:g}× slower, "
        f"{iters} iterations, snakemake --cores {args.cores} --executor {args.executor}, "
        f"median of {args.repeats}\n"
    )
    print(
        "| method | training, no straggler (s) | with straggler (s) | slowdown "
        "| vs average, no straggler | fast jobs done, with straggler (s) |"
    )
    print("|---|---|---|---|---|---|")
    for m in methods:
        a, b = med(m, False, "span"), med(m, True, "span")
        print(
            f"| {m} | {a:.1f} | {b:.1f} | {b / a:.2f}× | {a / base:.2f}× "
            f"| {med(m, True, 'fast'):.1f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/paravg_bench_sync"))
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument(
        "--executor",
        default="paravg-warm",
        help="Snakemake's executor: the local profile's paravg-warm (jobs forked from a warm "
        "server), or local (a fresh interpreter per job)",
    )
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--demo-minutes", type=float, default=20.0)
    ap.add_argument("--samples-per-iter", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--methods", default=",".join(STRAGGLER_METHODS), help="average first")
    ap.add_argument(
        "--results",
        default=None,
        help="the run's results directory, relative to the workspace "
        "(default: config/config.yaml's results)",
    )
    args = ap.parse_args()
    ws = args.workdir.resolve()
    ws.mkdir(parents=True, exist_ok=True)
    os.chdir(ws)  # the plan's paths are relative to the workspace, as Snakemake's
    print(f"workspace {ws}: building the demo up to the egs ...", flush=True)
    wall = snakemake(
        ws, base_overlay(args), "egs_all", cores=min(args.cores, 2), executor=args.executor
    )
    print(f"  done in {wall:.0f} s", flush=True)
    stragglers(ws, args)


if __name__ == "__main__":
    main()
