"""Scheduling overhead per job: SLURM (profiles/slurm) vs the local executor, same workflow.

Runs the toy iterative workflow (tests/fixtures/toy_slurm: init, then per iteration N
parallel `train_job`s and one `sync`), or with `--workflow tiny` the real pipeline on the
tiny config from its egs to final.pt, once locally and once through the SLURM profile per
value of `slurm-init-seconds-before-status-checks`, on the local cluster of
tools/local_slurm.sh (started here if it is not up; needs root). Prints wall time, jobs,
seconds per job, the ratio to the local run and the seconds per DAG stage, beside the mean
in-job time SLURM measured (sacct Elapsed: the job's two snakemake start-ups and its work)
and the cost per stage that the plugin's poll schedule predicts from it.

    .venv/bin/python benchmarks/bench_slurm.py                      # init seconds 1, 2, 5
    .venv/bin/python benchmarks/bench_slurm.py --init 1 40 --iterations 3 --jobs 4
    .venv/bin/python benchmarks/bench_slurm.py --workflow tiny --init 1 3 5   # real pipeline

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
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import REPO, SNAKEMAKE, TINY, run_snakemake, sacct_seconds

SCRIPT = REPO / "tools" / "local_slurm.sh"
TOY = REPO / "tests" / "fixtures" / "toy_slurm" / "Snakefile"


def run(args: list[str], cwd: Path, timeout_s: int) -> float:
    """Run snakemake with ``args`` in ``cwd`` under `timeout -k 30`; return the wall
    time; raise on failure."""
    return run_snakemake(cwd, args, timeout_s=timeout_s, own_snakefile=False).wall


def sacct_elapsed(workdir: Path, since: float) -> list[float]:
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
    return [sacct_seconds(e) for w, e, s in rows if Path(w) == workdir and s == "COMPLETED"]


def first_poll_after(init: float, duration: float, cap: float = 180) -> float:
    """Time of the plugin's first status poll at or after ``duration`` s (no other job ends)."""
    t = interval = init
    while t < duration:
        interval = min(interval + 10, cap)
        t += interval
    return t


def toy_workload(args: argparse.Namespace, tmp: Path):
    """(label, n_jobs, stages, prepare(dir) -> snakemake args) of the toy workflow."""
    config = ["--config", f"iterations={args.iterations}", f"jobs={args.jobs}"]
    config.append(f"work_s={args.work_s}")

    def prepare(d: Path) -> list[str]:
        d.mkdir()
        shutil.copy(TOY, d / "Snakefile")
        return config

    label = (
        f"toy workflow: {args.iterations} iterations x {args.jobs} train jobs (+ init + syncs), "
        f"{args.work_s:g} s of work per train job"
    )
    return label, 1 + args.iterations * (args.jobs + 1), 1 + 2 * args.iterations, prepare


def final_target() -> str:
    """``final.pt`` of the tiny config's experiment ``default``, as its layout names it
    (relative to the workspace)."""
    from paravg.config import REPO_CONFIG
    from paravg.layout import Layout
    from paravg.progress import load_config

    return Layout(load_config([REPO_CONFIG, TINY])["results"]).final_model("default")


def tiny_workload(args: argparse.Namespace, tmp: Path):
    """The real Snakefile on tests/pipeline/tiny.yaml, from egs (built once, locally) to
    final.pt, with the overlay of tests/pipeline/test_slurm.py: 2 iterations x 2 jobs."""
    final = final_target()
    upstream = tmp / "upstream"
    upstream.mkdir()
    overlay = tmp / "overlay.yaml"
    overlay.write_text(
        f"trainer:\n  num_epochs: {args.tiny_epochs}\n"
        f"  num_jobs_initial: {args.jobs}\n  num_jobs_final: {args.jobs}\n"
    )
    common = ["-s", str(REPO / "Snakefile"), "--configfile", str(TINY), str(overlay)]
    print("building the tiny egs locally ...", flush=True)
    run([*common, "--directory", str(upstream), "--cores", str(args.cores), "egs_all"], tmp, 1800)
    plan = subprocess.run(
        [SNAKEMAKE, final, *common, "--directory", str(upstream), "-n", "--quiet", "rules"],
        cwd=tmp,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts = {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)$", plan, re.M)}
    iterations = counts["average"]
    n_jobs = counts["total"]

    def prepare(d: Path) -> list[str]:
        shutil.copytree(upstream, d, symlinks=True, copy_function=shutil.copy2)
        return [*common, "--directory", str(d), final]

    label = (
        f"tiny pipeline, egs -> final.pt: {iterations} iterations x {args.jobs} train jobs "
        "(+ init_model, averages, combine, priors)"
    )
    return label, n_jobs, 1 + 2 * iterations + 2, prepare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflow", choices=["toy", "tiny"], default="toy")
    parser.add_argument("--iterations", type=int, default=3, help="toy: iterations")
    # 2 = one wave: the local cluster runs 2 GPU jobs at once (2 CPUs, 2 fake GPUs).
    parser.add_argument("--jobs", type=int, default=2, help="train jobs per iteration")
    parser.add_argument("--work-s", type=float, default=0, help="toy: sleep in each train job")
    parser.add_argument("--tiny-epochs", type=float, default=0.1, help="tiny: num_epochs")
    parser.add_argument("--init", type=int, nargs="+", default=[1, 2, 5], metavar="S")
    parser.add_argument("--cores", type=int, default=2, help="cores of the local run")
    args = parser.parse_args()

    if os.geteuid() != 0:
        sys.exit("needs root: the local SLURM cluster is started by tools/local_slurm.sh")
    subprocess.run(["bash", SCRIPT, "start"], check=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_slurm.") as tmp_name:
        tmp = Path(tmp_name)
        workload = toy_workload if args.workflow == "toy" else tiny_workload
        label, n_jobs, stages, prepare = workload(args, tmp)
        local_args = prepare(tmp / "local")
        profile = str(REPO / "profiles" / "local")
        base = run(
            ["--profile", profile, "--cores", str(args.cores), *local_args], tmp / "local", 1800
        )
        rows.append((f"local --cores {args.cores}", base, None, None))
        for init in args.init:
            work = tmp / f"slurm_init{init}"
            slurm_args = prepare(work)
            since = time.time()
            wall = run(
                [
                    "--profile",
                    str(REPO / "profiles" / "slurm"),
                    "--paravg-slurm-init-seconds-before-status-checks",
                    str(init),
                    *slurm_args,
                ],
                work,
                3600,
            )
            elapsed = sacct_elapsed(work, since)
            if len(elapsed) != n_jobs:
                raise RuntimeError(f"sacct lists {len(elapsed)} jobs, expected {n_jobs}")
            rows.append((f"slurm init={init}s", wall, sum(elapsed) / len(elapsed), init))

    print(f"\n{label}: {n_jobs} jobs, {stages} stages\n")
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
