"""Scheduling overhead per job: SLURM (profiles/slurm) vs the local executor, same workflow.

Runs the toy iterative workflow (tests/fixtures/toy_slurm: init, then per iteration N
parallel `train_job`s and one `sync`) once locally and once through the SLURM profile per
value of `slurm-init-seconds-before-status-checks`, on the local cluster of
tools/local_slurm.sh (started here if it is not up; needs root). Prints wall time, jobs,
seconds per job and the ratio to the local run, plus the mean in-job time SLURM measured
(sacct Elapsed: the job's own snakemake start-ups) and the part of the wall time that is
neither (submission and status polling).

    .venv/bin/python benchmarks/bench_slurm.py                      # init seconds 1, 2, 5
    .venv/bin/python benchmarks/bench_slurm.py --init 1 40 --iterations 3 --jobs 4

The plugin polls `init` seconds after a submission, then at intervals growing by 10 s
while no job finishes (init+10, init+20, ..., at most 180 s). A stage is noticed at the first
poll after its jobs end: at `init` s when they take less than that, else at 2 * init + 10 s
or later. Every job here takes several seconds (two snakemake start-ups), so the model
column, that first poll time for the measured in-job time + 1 s of submission, predicts
the cost per stage.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "local_slurm.sh"
TOY = REPO / "tests" / "fixtures" / "toy_slurm" / "Snakefile"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run(args: list[str], cwd: Path, timeout_s: int) -> float:
    """Run snakemake under `timeout -k 30`; return the wall time; raise on failure."""
    t0 = time.monotonic()
    proc = subprocess.run(
        ["timeout", "-k", "30", str(timeout_s), SNAKEMAKE, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}")
    return wall


def seconds(elapsed: str) -> int:
    """sacct Elapsed ([D-]HH:MM:SS) in seconds."""
    days, _, hms = elapsed.rpartition("-")
    h, m, s = (int(x) for x in hms.split(":"))
    return int(days or 0) * 86400 + h * 3600 + m * 60 + s


def sacct_elapsed(workdir: Path, since: float) -> list[int]:
    """Elapsed seconds of each SLURM job submitted from ``workdir`` since ``since``."""
    out = subprocess.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "--allusers",
            "--format=WorkDir,Elapsed,State",
            "-S",
            time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 5)),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|") for line in out.splitlines()]
    return [seconds(e) for w, e, s in rows if Path(w) == workdir and s == "COMPLETED"]


def first_poll_after(init: float, duration: float, cap: float = 180) -> float:
    """Time of the plugin's first status poll at or after ``duration`` s (no other job ends)."""
    t = interval = init
    while t < duration:
        interval = min(interval + 10, cap)
        t += interval
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3)
    # 2 = one wave: the local cluster runs 2 GPU jobs at once (2 CPUs, 2 fake GPUs).
    parser.add_argument("--jobs", type=int, default=2, help="train jobs per iteration")
    parser.add_argument("--work-s", type=float, default=0, help="sleep in each train job")
    parser.add_argument("--init", type=int, nargs="+", default=[1, 2, 5], metavar="S")
    parser.add_argument("--cores", type=int, default=2, help="cores of the local run")
    args = parser.parse_args()

    if os.geteuid() != 0:
        sys.exit("needs root: the local SLURM cluster is started by tools/local_slurm.sh")
    subprocess.run(["bash", SCRIPT, "start"], check=True)
    config = [
        "--config",
        f"iterations={args.iterations}",
        f"jobs={args.jobs}",
        f"work_s={args.work_s}",
    ]
    n_jobs = 1 + args.iterations * (args.jobs + 1)
    stages = 1 + 2 * args.iterations
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_slurm.") as tmp:
        local = Path(tmp) / "local"
        local.mkdir()
        shutil.copy(TOY, local / "Snakefile")
        base = run(["--cores", str(args.cores), *config], local, 600)
        rows.append((f"local --cores {args.cores}", base, None, None))
        for init in args.init:
            work = Path(tmp) / f"slurm_init{init}"
            work.mkdir()
            shutil.copy(TOY, work / "Snakefile")
            since = time.time()
            wall = run(
                [
                    "--profile",
                    str(REPO / "profiles" / "slurm"),
                    "--slurm-init-seconds-before-status-checks",
                    str(init),
                    *config,
                ],
                work,
                3600,
            )
            elapsed = sacct_elapsed(work, since)
            if len(elapsed) != n_jobs:
                raise RuntimeError(f"sacct lists {len(elapsed)} jobs, expected {n_jobs}")
            rows.append((f"slurm init={init}s", wall, sum(elapsed) / len(elapsed), init))

    print(
        f"\ntoy workflow: {args.iterations} iterations x {args.jobs} train jobs "
        f"(+ init + syncs) = {n_jobs} jobs, {stages} stages, work {args.work_s:g} s/train job\n"
    )
    head = (
        f"{'run':<18} {'wall s':>8} {'jobs':>5} {'s/job':>7} {'vs local':>9} "
        f"{'s/stage':>8} {'in-job s':>9} {'model s/stage':>14}"
    )
    print(head)
    print("-" * len(head))
    for name, wall, in_job, init in rows:
        if in_job is None:
            extra = f"{'-':>9} {'-':>14}"
        else:
            extra = f"{in_job:9.1f} {first_poll_after(init, in_job + 1):14.1f}"
        print(
            f"{name:<18} {wall:8.1f} {n_jobs:5d} {wall / n_jobs:7.2f} "
            f"{wall / base:8.1f}x {wall / stages:8.1f} {extra}"
        )


if __name__ == "__main__":
    main()
