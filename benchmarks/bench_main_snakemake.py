"""The main snakemake's own CPU per job, at N = 12 and N = 128 jobs per iteration.

On a cluster every job has its own core, but one process runs the whole DAG: the main
snakemake notices each finished job, updates the DAG and submits the next ones. An
iteration's N jobs wait for the N jobs before them (averaging), so that work is serial and
on every iteration's critical path: N × (its CPU per job). This benchmark measures it.

The tiny config's egs (widened to ``--archives`` archives), ``--iterations`` iterations of
N learners averaging, each iteration's sync node and diagnostics as targets too, training
simulated by a sleep of ``--train-seconds`` (the job forms its start from the N models
before it and writes its model: milliseconds), run by the local profile's executor
(paravg-warm: the jobs run in forks of a server, outside the main process), with a core
per job (``--cores``: as on a cluster, an iteration's jobs are dispatched at once; with
fewer, Snakemake's scheduler rescans the waiting jobs at every dispatch). The main
snakemake's own CPU (``/proc/<pid>/stat`` utime + stime: its threads, not its children)
is read when it starts its first job and just before it ends:

    per job = (CPU at the end − CPU at the first job) / jobs run

what the scheduler, the DAG and the executor's submission cost in the main process per
job (the start-up before the first job is ``bench_scale.py``'s), and per iteration.

Each N runs twice (``--modes``): the jobs averaging the N job models before them
themselves (``own``: N model inputs and N statistics in each job's params) and the jobs
reading the node's ``<t>.pt`` and its summary (``synced``: two inputs; the node on the
critical path). ``run.synced_start_jobs`` (32) and ``run.synced_start_mb`` choose between
them by default (marked ``*``).

    .venv/bin/python benchmarks/bench_main_snakemake.py            # N = 12 and 128

About 5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from _harness import (
    FRAMES_PER_EG,
    TINY,
    run_measured,
    snakemake_cmd,
    upstream_workspace,
    widen_egs,
)

from paravg.config import REPO_CONFIG
from paravg.layout import Layout
from paravg.plan import experiment_plans
from paravg.progress import load_config

#: where the jobs of average get their start (module docstring)
MODES = {
    "own": {"run": {"synced_start_mb": 1e12, "synced_start_jobs": 10**6}},
    "synced": {"run": {"synced_start_mb": 0}},
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[12, 128], help="N of each run")
    ap.add_argument("--modes", nargs="+", choices=list(MODES), default=["own", "synced"])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--train-seconds", type=float, default=0.05)
    ap.add_argument("--archives", type=int, help="egs archives (default: the largest N)")
    ap.add_argument(
        "--cores", type=int, help="snakemake --cores (default: the largest N, a core per job)"
    )
    args = ap.parse_args()
    archives = args.archives or max(args.jobs)
    cores = args.cores or max(args.jobs)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_main.") as tmp_name:
        tmp = Path(tmp_name)
        upstream = upstream_workspace(tmp)
        results = load_config([REPO_CONFIG, TINY])["results"]
        widen_egs(Layout.in_workdir(upstream, results), archives)
        info = json.loads(Path(Layout.in_workdir(upstream, results).egs_info()).read_text())
        for n in args.jobs:
            for mode in args.modes:
                # num_iters = int(E · A · F / N): half an iteration more than wanted
                epochs = (args.iterations + 0.5) * n / (archives * FRAMES_PER_EG)
                overlay = {
                    "trainer": {"num_epochs": epochs, "num_jobs_initial": n, "num_jobs_final": n},
                    "simulate": {"train_seconds": args.train_seconds},
                    **MODES[mode],
                }
                path = tmp / f"overlay{n}{mode}.yaml"
                path.write_text(yaml.safe_dump(overlay))
                plan = experiment_plans(load_config([REPO_CONFIG, TINY, path]), info)["default"]
                if plan.num_iters < args.iterations:
                    sys.exit(f"N = {n}: the plan has {plan.num_iters} iterations")
                targets = plan.job_outputs(args.iterations)
                for t in range(1, args.iterations + 1):
                    targets += [plan.synced_model(t), plan.layout.diag("default", t)]
                synced = plan.starts_from_synced(args.iterations - 1)
                overlay_default = {k: v for k, v in overlay.items() if k != "run"}
                path_default = tmp / f"overlay{n}default.yaml"
                path_default.write_text(yaml.safe_dump(overlay_default))
                config_default = load_config([REPO_CONFIG, TINY, path_default])
                by_default = experiment_plans(config_default, info)["default"].starts_from_synced(
                    args.iterations - 1
                )
                ws = tmp / f"n{n}{mode}"
                shutil.copytree(upstream, ws, symlinks=True)
                cmd = [
                    *snakemake_cmd(ws, TINY, path),
                    "--executor", "paravg-warm",
                    "--cores", str(cores),
                    *targets,
                ]  # fmt: skip
                print(f"N = {n}, {mode}: {args.iterations} iterations ...", flush=True)
                m = run_measured(cmd, ws, 3600, "bench_main_snakemake")
                m["after"] = m["end_cpu"] - m["start_cpu"]
                m["start"] = ("<t>.pt" if synced else f"{n} models") + (
                    " *" if synced == by_default else ""
                )
                rows[n, mode] = m
                shutil.rmtree(ws)
    first = next(iter(rows))
    base = rows[first]["after"] / rows[first]["jobs"]
    print(
        f"\nthe main snakemake's own CPU, {args.iterations} iterations of N averaging learners "
        f"(+ sync nodes, diagnostics), jobs simulated ({args.train_seconds:g} s), paravg-warm, "
        f"--cores {cores}\n"
    )
    head = (
        f"{'N':>5} {'job starts from':>18} {'jobs':>6} {'wall s':>7} {'start-up CPU s':>15} "
        f"{'CPU s after':>12} {'ms/job':>7} {f'vs {first[0]} {first[1]}':>11} "
        f"{'CPU s/iteration':>16}"
    )
    print(head)
    print("-" * len(head))
    for (n, _), m in rows.items():
        per_job = m["after"] / m["jobs"]
        print(
            f"{n:5d} {m['start']:>18} {m['jobs']:6d} {m['wall']:7.1f} {m['start_cpu']:15.2f} "
            f"{m['after']:12.2f} {1000 * per_job:7.1f} {per_job / base:10.2f}x "
            f"{m['after'] / args.iterations:16.2f}"
        )
    print(
        "\n*: the default (run.synced_start_jobs, run.synced_start_mb). CPU s/iteration: the "
        "main process's serial work per iteration of N learners (on a cluster, beside each "
        "job's own start-up and SLURM's dispatch)"
    )


if __name__ == "__main__":
    main()
