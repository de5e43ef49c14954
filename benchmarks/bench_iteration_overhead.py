"""Scheduling overhead per training iteration: SLURM (profiles/slurm) beside the local executor.

The real Snakefile trains the tiny config's egs with N jobs per iteration whose training is
a fixed sleep of L seconds (``simulate.train_seconds``: the job forms its start model from
the previous iteration's jobs, sleeps instead of training, writes its model and JSON), so
the only thing measured is what the workflow itself costs between iterations: noticing
that an iteration's jobs ended, submitting the next ones, SLURM starting them, their
snakemake and Python start-up, reading and averaging the models. Per iteration,

    overhead = (last job of iteration t ends) − (last job of iteration t − 1 ends) − L

from the ``wall`` times in the jobs' JSON, averaged over the iterations after the first.
Only the training chain is targeted (the off-path sync nodes and diagnostics would compete
for this machine's two cores). The local cluster of tools/local_slurm.sh is started with
``LOCAL_SLURM_CPUS`` CPUs and one fake GPU per job, so that N sleeping jobs run at once
(their start-ups still share the machine's real cores). Target: SLURM overhead ≤ 10 s per
iteration for L = 5, 30 and 120 s.

    .venv/bin/python benchmarks/bench_iteration_overhead.py                 # L = 5 30 120
    .venv/bin/python benchmarks/bench_iteration_overhead.py --train-seconds 5 --iterations 4
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from paravg.config import REPO_CONFIG  # noqa: E402
from paravg.io import read_json  # noqa: E402
from paravg.layout import Layout  # noqa: E402
from paravg.plan import ExperimentPlan, experiment_plans  # noqa: E402
from paravg.progress import load_config  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TINY = REPO / "tests" / "pipeline" / "tiny.yaml"


def snakemake(workdir: Path, args: list[str], timeout_s: int) -> float:
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir), *args]
    t0 = time.monotonic()
    proc = subprocess.run(
        ["timeout", "-k", "30", str(timeout_s), *cmd],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-5000:]}")
    return time.monotonic() - t0


def plan_of(overlay: dict, info: dict) -> ExperimentPlan:
    """The plan of experiment ``default`` under the tiny config and ``overlay``."""
    return experiment_plans(load_config([REPO_CONFIG, TINY, overlay]), info)["default"]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-seconds", type=float, nargs="+", default=[5, 30, 120])
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--cluster-cpus", type=int, default=8)
    ap.add_argument("--skip-slurm", action="store_true")
    args = ap.parse_args()
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
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_overhead.") as tmp_name:
        tmp = Path(tmp_name)
        upstream = tmp / "upstream"
        upstream.mkdir()
        print("building the tiny egs ...", flush=True)
        snakemake(upstream, ["--configfile", str(TINY), "--cores", "2", "egs_all"], 1800)
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
        plan = plan_of({"trainer": trainer}, info)
        if plan.num_iters < args.iterations:
            sys.exit(f"the plan has {plan.num_iters} iterations, not {args.iterations}")
        targets = plan.job_outputs(args.iterations)  # the last timed iteration's jobs
        for seconds in args.train_seconds:
            overlay = {"trainer": trainer, "simulate": {"train_seconds": seconds}}
            row = {"L": seconds}
            runs = [
                (
                    "local",
                    ["--profile", str(REPO / "profiles" / "local"), "--cores", str(args.jobs)],
                )
            ]
            if not args.skip_slurm:
                runs.append(("slurm", ["--profile", str(REPO / "profiles" / "slurm")]))
            for name, profile in runs:
                ws = tmp / f"{name}_{seconds:g}"
                shutil.copytree(upstream, ws, symlinks=True)
                (ws / "overlay.yaml").write_text(yaml.safe_dump(overlay))
                cfg = ["--configfile", str(TINY), str(ws / "overlay.yaml")]
                budget = int(args.iterations * (seconds + 120) + 600)
                wall = snakemake(ws, [*profile, *targets, *cfg], budget)
                over = overhead_per_iteration(ws, plan, args.iterations, seconds)
                row[name] = statistics.mean(over)
                row[f"{name}_max"] = max(over)
                row[f"{name}_wall"] = wall
                print(
                    f"  L={seconds:g}s {name}: overhead/iteration {[round(o, 1) for o in over]}"
                    f" (wall {wall:.0f} s)",
                    flush=True,
                )
                shutil.rmtree(ws)
            rows.append(row)
    print(
        f"\n{args.iterations} iterations x {args.jobs} jobs, training simulated by a sleep of "
        "L s; overhead = iteration wall time - L (mean over iterations 2..)\n"
    )
    head = (
        f"{'L (s)':>6} {'local s/iter':>13} {'slurm s/iter':>13} {'slurm max':>10} "
        f"{'slurm/local':>12}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        slurm = r.get("slurm")
        s = (
            f"{slurm:13.1f} {r['slurm_max']:10.1f} {slurm / max(r['local'], 0.1):11.1f}x"
            if slurm
            else ""
        )
        print(f"{r['L']:6g} {r['local']:13.1f} {s}")
    print("\ntarget: slurm overhead <= 10 s per iteration")


if __name__ == "__main__":
    main()
