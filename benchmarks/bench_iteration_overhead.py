"""Scheduling overhead per training iteration, and CPU per job: SLURM (profiles/slurm), with
and without warm workers, beside the local executor, in one run.

The real Snakefile trains the tiny config's egs with N jobs per iteration whose training is
a fixed sleep of L seconds (``simulate.train_seconds``: the job forms its start model from
the previous iteration's jobs, sleeps instead of training, writes its model and JSON), so
the only thing measured is what the workflow itself costs between iterations: noticing
that an iteration's jobs ended, submitting the next ones, SLURM starting them, their
snakemake and Python start-up, reading and averaging the models. Per iteration,

    overhead = (last job of iteration t ends) − (last job of iteration t − 1 ends) − L

from the ``wall`` times in the jobs' JSON, averaged over the iterations after the first.
The targets are the iterations' train jobs *and* their off-path jobs (each iteration's
sync node and diagnostics), which compete for the same cores (``--train-only``: the train
jobs alone, as before). The local cluster of tools/local_slurm.sh is started with
``LOCAL_SLURM_CPUS`` CPUs and one fake GPU per job, so that N sleeping jobs run at once
(their start-ups still share the machine's real cores).

CPU per job: every process of the run, divided by the DAG jobs it ran: the snakemake
started here (``getrusage`` of the finished process: for the local executor, its jobs too)
plus, on SLURM, each SLURM job's ``TotalCPU`` (``sacct``: a job's own snakemake and
script, or a warm worker allocation's server, forkserver and forks). A job's own work here
is milliseconds (forming and writing a tiny model), so this is its fixed cost.

Runs: ``local`` (profiles/local: paravg-warm), ``slurm`` (profiles/slurm: a snakemake and a
Python per SLURM job) and ``slurm-warm`` (profiles/slurm with ``--paravg-slurm-warm-workers
K``: one worker allocation of K = N + 2 CPUs and N GPUs, the main snakemake running each
job's Snakemake side and a fork of a warm server its script). Targets: SLURM overhead
≤ 3 s per iteration with a core per job (N = 2 here), ≤ 6 s for N = 4 on this 2-core
machine; CPU per job beyond its work ≤ 0.5 s.

    B=benchmarks/bench_iteration_overhead.py
    .venv/bin/python $B --train-seconds 5 --iterations 4              # 4 jobs, 2 cores
    .venv/bin/python $B --train-seconds 5 --iterations 4 --jobs 2     # a core per job
    .venv/bin/python benchmarks/bench_iteration_overhead.py                 # L = 5 30 120
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from _harness import REPO, TINY, plan_of, run_snakemake, sacct_seconds

from paravg.config import REPO_CONFIG
from paravg.io import read_json
from paravg.layout import Layout
from paravg.plan import ExperimentPlan
from paravg.progress import load_config


def slurm_cpu(workdir: Path, since: float) -> tuple[float, int]:
    """(TotalCPU summed over the SLURM jobs run from ``workdir`` since ``since``, their
    number), from sacct's batch steps."""
    fields = "JobIDRaw,WorkDir,TotalCPU"
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 5))
    for _ in range(20):  # a job's TotalCPU reaches the database as it completes
        out = subprocess.run(
            ["sacct", "-n", "-P", "--allusers", f"--format={fields}", "-S", start],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        rows = [line.split("|") for line in out.splitlines()]
        ours = {r[0].split(".")[0] for r in rows if r[1] and Path(r[1]) == workdir}
        batch = [r for r in rows if r[0].split(".")[0] in ours and r[0].endswith(".batch")]
        if len(batch) == len(ours):
            return sum(sacct_seconds(r[2]) for r in batch), len(ours)
        time.sleep(1)
    raise RuntimeError(f"sacct has no batch step for some jobs of {workdir}")


def overhead_per_iteration(
    ws: Path, plan: ExperimentPlan, iterations: int, seconds: float
) -> list[float]:
    """(end of iteration t) − (end of iteration t − 1) − L for t = 1 .. iterations − 1."""
    L = Layout.in_workdir(ws, plan.layout.results, plan.layout.logs)
    ends = []
    for t in range(1, iterations + 1):
        stats = [read_json(L.job_stats("default", t, j)) for j in range(plan.num_jobs(t - 1))]
        assert all(s.get("simulated") == seconds for s in stats), "not a simulated run"
        ends.append(max(s["wall"]["finished_at"] for s in stats))
    return [b - a - seconds for a, b in itertools.pairwise(ends)]


def offpath_targets(plan: ExperimentPlan, iterations: int) -> list[str]:
    """Each timed iteration's off-path jobs: its sync node's model and its diagnostics."""
    out = []
    for t in range(1, iterations + 1):
        out += [plan.synced_model(t), plan.layout.diag("default", t)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-seconds", type=float, nargs="+", default=[5, 30, 120])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--cluster-cpus", type=int, default=8)
    ap.add_argument("--skip-slurm", action="store_true")
    ap.add_argument("--no-warm", action="store_true", help="no slurm-warm run")
    ap.add_argument(
        "--warm-workers", type=int, default=0, help="workers of the allocation (0: jobs + 2)"
    )
    ap.add_argument("--train-only", action="store_true", help="no off-path jobs as targets")
    args = ap.parse_args()
    workers = args.warm_workers or args.jobs + 2
    if not args.skip_slurm:
        if os.geteuid() != 0:
            sys.exit("needs root for the local SLURM cluster (or --skip-slurm)")
        # every train job holds a (fake) GPU: declare one per job, or they queue in waves
        env = {
            **os.environ,
            "LOCAL_SLURM_CPUS": str(args.cluster_cpus),
            "LOCAL_SLURM_GPUS": str(max(args.jobs, 2)),
        }
        subprocess.run(
            ["bash", str(REPO / "tools" / "local_slurm.sh"), "start"], env=env, check=True
        )
    runs = [("local", ["--profile", str(REPO / "profiles" / "local"), "--cores", str(args.jobs)])]
    if not args.skip_slurm:
        slurm = ["--profile", str(REPO / "profiles" / "slurm")]
        runs.append(("slurm", slurm))
        if not args.no_warm:
            warm = [
                "--paravg-slurm-warm-workers", str(workers),
                "--paravg-slurm-warm-gpus", str(args.jobs),
            ]  # fmt: skip
            runs.append(("slurm-warm", [*slurm, *warm]))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_overhead.") as tmp_name:
        tmp = Path(tmp_name)
        upstream = tmp / "upstream"
        upstream.mkdir()
        print("building the tiny egs ...", flush=True)
        run_snakemake(
            upstream, ["--configfile", str(TINY), "--cores", "2", "egs_all"], timeout_s=1800
        )
        results = load_config([REPO_CONFIG, TINY])["results"]
        info = read_json(Layout.in_workdir(upstream, results).egs_info())
        # epochs for the iterations wanted (num_iters = int(epochs · A · F / N)); the plan
        # says how many there are
        per_epoch = info["num_archives"] * info["frames_per_eg"] / args.jobs
        trainer = {
            "num_epochs": (args.iterations + 0.5) / per_epoch,
            "num_jobs_initial": args.jobs,
            "num_jobs_final": args.jobs,
        }
        plan = plan_of([REPO_CONFIG, TINY, {"trainer": trainer}], info=info)
        if plan.num_iters < args.iterations:
            sys.exit(f"the plan has {plan.num_iters} iterations, not {args.iterations}")
        targets = plan.job_outputs(args.iterations)  # the last timed iteration's jobs
        if not args.train_only:
            targets += offpath_targets(plan, args.iterations)
        for seconds in args.train_seconds:
            overlay = {"trainer": trainer, "simulate": {"train_seconds": seconds}}
            row = {"L": seconds}
            for name, profile in runs:
                ws = tmp / f"{name}_{seconds:g}"
                shutil.copytree(upstream, ws, symlinks=True)
                (ws / "overlay.yaml").write_text(yaml.safe_dump(overlay))
                cfg = ["--configfile", str(TINY), str(ws / "overlay.yaml")]
                budget = int(args.iterations * (seconds + 120) + 600)
                since = time.time()
                run = run_snakemake(ws, [*profile, *targets, *cfg], timeout_s=budget)
                wall, out, main_cpu = run.wall, run.output, run.cpu
                jobs = len(re.findall(r"^Finished jobid", out, re.M))
                cluster_cpu, slurm_jobs = slurm_cpu(ws, since) if name != "local" else (0.0, 0)
                over = overhead_per_iteration(ws, plan, args.iterations, seconds)
                row[name] = {
                    "overhead": statistics.mean(over),
                    "max": max(over),
                    "wall": wall,
                    "jobs": jobs,
                    "slurm_jobs": slurm_jobs,
                    "main_cpu": main_cpu / jobs,
                    "cluster_cpu": cluster_cpu / jobs,
                    "cpu": (main_cpu + cluster_cpu) / jobs,
                }
                print(
                    f"  L={seconds:g}s {name}: overhead/iteration {[round(o, 1) for o in over]}"
                    f" (wall {wall:.0f} s; {jobs} jobs, {slurm_jobs} SLURM jobs; CPU/job "
                    f"{row[name]['cpu']:.2f} s = {row[name]['main_cpu']:.2f} main snakemake "
                    f"+ {row[name]['cluster_cpu']:.2f} in SLURM jobs)",
                    flush=True,
                )
                shutil.rmtree(ws)
            rows.append(row)
    scope = "train jobs" if args.train_only else "train jobs + sync nodes + diagnostics"
    print(
        f"\n{args.iterations} iterations x {args.jobs} jobs ({scope}), training simulated by a "
        f"sleep of L s; overhead = iteration wall time - L (mean over iterations 2..); CPU per "
        f"DAG job, every process (slurm-warm: {workers} workers, {args.jobs} GPUs)\n"
    )
    head = (
        f"{'L (s)':>6} {'run':>11} {'s/iter':>7} {'max':>6} {'CPU s/job':>10} "
        f"{'main':>6} {'in SLURM':>9} {'jobs':>5} {'SLURM jobs':>11} "
        f"{'s/iter vs slurm':>16} {'CPU vs slurm':>13}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        base = r.get("slurm")
        for name, _ in runs:
            m = r[name]
            ratio = (
                f"{m['overhead'] / max(base['overhead'], 0.1):15.2f}x "
                f"{m['cpu'] / base['cpu']:12.2f}x"
                if base
                else ""
            )
            print(
                f"{r['L']:6g} {name:>11} {m['overhead']:7.1f} {m['max']:6.1f} {m['cpu']:10.2f} "
                f"{m['main_cpu']:6.2f} {m['cluster_cpu']:9.2f} {m['jobs']:5d} "
                f"{m['slurm_jobs']:11d} {ratio}"
            )
    print(
        "\ntargets: SLURM overhead <= 3 s per iteration with a core per job, <= 6 s for 4 "
        "jobs on 2 cores; CPU per job beyond its work <= 0.5 s"
    )


if __name__ == "__main__":
    main()
