"""The DAG at Cui et al.'s scale: a cluster job's start-up against t and N, and the main DAG.

Workspaces with the tiny config's egs (archives copied up to ``--archives``) and a
``--iterations`` × N schedule are given the files of finished iterations as the jobs write
them (job JSON with their plan record, synced models, diagnostics; model contents are
placeholders: nothing trains). Then, in one run, printed side by side as ratios:

1. **a job's start-up**: the command the SLURM executor runs on the node for one training
   job (``--target-jobs train_job:exp=default,t=T,j=3 --allowed-rules train_job --force
   --nolock ...``, here as a dry run so nothing trains), in CPU seconds, for the job of
   index t = ``--early`` and t = T (the last iteration), at N = ``--jobs`` and at
   N = ``--small-jobs`` learners: the least of ``--repeats`` rounds, the four jobs
   interleaved in each (a load that comes and goes hits them alike), after a round that
   warms the file cache. The workspaces hold the memo of the plan's fingerprint chain,
   as the main snakemake leaves it before it submits a job. Targets: t = T ≤ 1.2 ×
   t = ``--early``; N = ``--jobs`` no more than N = ``--small-jobs``.
2. **the main DAG**: ``snakemake`` on a fresh ``--iterations`` × ``--jobs`` run and on a
   resume at iteration ``--resume``, with the memo the interrupted run left and without
   it (as after a code update), and with blocks sized by ``run.block_jobs`` alone (600 // N
   iterations, as before ``run.block_edges`` bounded them to one iteration of 128
   averaging learners), until it starts its first job. Target: ≤ 15 s on an idle 2-core
   machine; CPU seconds are printed beside the wall time, which a loaded machine inflates.

    .venv/bin/python benchmarks/bench_scale.py --jobs 128 --iterations 1000

About 6 minutes on 2 cores at that size (writing 128,000 job records takes most of it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from pathlib import Path

import yaml
from _harness import (
    FRAMES_PER_EG,
    TINY,
    children_cpu,
    process_cpu,
    snakemake_cmd,
    upstream_workspace,
    widen_egs,
)

from paravg.config import REPO_CONFIG
from paravg.layout import Layout
from paravg.plan import ExperimentPlan, experiment_plans
from paravg.progress import load_config


def overlay_for(tmp: Path, iterations: int, jobs: int, archives: int) -> Path:
    """A config overlay whose schedule has ``iterations`` iterations of ``jobs`` jobs:
    num_iters = int(E · A · F · 2 / (N + N)) for E epochs of A archives of F frames."""
    epochs = iterations * 2 * jobs / (2 * archives * FRAMES_PER_EG)
    trainer = {"num_epochs": epochs, "num_jobs_initial": jobs, "num_jobs_final": jobs}
    overlay = tmp / f"overlay{jobs}.yaml"
    overlay.write_text(yaml.safe_dump({"trainer": trainer}))
    return overlay


def fabricate(
    upstream: Path, ws: Path, overlay: Path, archives: int, done: int, start: int = 1
) -> ExperimentPlan:
    """Copy ``upstream`` (unless ``ws`` exists), widen its egs to ``archives`` archives,
    write finished iterations ``start``..``done`` as the jobs, sync nodes and diagnostics
    would; return the plan (every path and number comes from it)."""
    fresh = not ws.exists()
    if fresh:
        shutil.copytree(upstream, ws, symlinks=True)
    cfg = load_config([REPO_CONFIG, TINY, overlay])
    cwd = os.getcwd()
    os.chdir(ws)  # the plan's paths are relative to the workspace, as Snakemake's
    try:
        L = Layout(cfg["results"])
        if fresh:
            widen_egs(L, archives)
        info = json.loads(Path(L.egs_info()).read_text())
        # its memo, as the main run leaves it
        plan = experiment_plans(cfg, info, fingerprint_dir=".snakemake/paravg-plan")["default"]
        e = "default"
        if done == 0:
            return plan
        plan.fingerprint(done)  # the memo
        if start == 1:
            put(L.init_model(e), "placeholder")
            put(L.init_stats(e), json.dumps({"plan": {"fingerprint": plan.fingerprint(0)}}))
            put(L.diag(e, 0), "{}")
        for t in range(start, done + 1):
            put(plan.synced_model(t), "placeholder")
            put(plan.node_summary(t), "{}")
            put(L.diag(e, t), "{}")
            for j in range(plan.num_jobs(t - 1)):
                rec = {
                    "fingerprint": plan.fingerprint(t),
                    "params": plan.job_params(t - 1, j),
                    "sync": plan.sync_fingerprint_part(),
                }
                put(L.job_stats(e, t, j), json.dumps({"plan": rec}))
                if t == done:  # the temporary job models of the newest iteration
                    put(L.job_model(e, t, j), "placeholder")
        return plan
    finally:
        os.chdir(cwd)


def put(path: str, text: str) -> None:
    """Write ``text`` to the layout file ``path``, making its directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_text(text)


def cpu_of(cmd: list[str]) -> float:
    """CPU seconds (user + system) of a command run to its end."""
    before = children_cpu()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[-14:])} failed:\n{proc.stdout[-3000:]}")
    return children_cpu() - before


def job_cmd(ws: Path, overlay: Path, t: int) -> list[str]:
    """What the SLURM executor runs on the node for train job 3 of index t (a dry run)."""
    return [
        *snakemake_cmd(ws, TINY, overlay),
        "--target-jobs",
        f"train_job:exp=default,t={t},j=3",
        "--allowed-rules",
        "train_job",
        "--force",
        "--nolock",
        "--ignore-incomplete",
        "--notemp",
        "--cores",
        "1",
        "-n",
    ]


def until_first_job(cmd: list[str]) -> tuple[float, float, str]:
    """(wall, CPU seconds, rule) until snakemake starts its first job; then kill it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    tail: deque[str] = deque(maxlen=40)
    try:
        for line in p.stdout:
            tail.append(line)
            s = line.strip()
            if s.startswith(("rule ", "localrule ", "checkpoint ")) and s.endswith(":"):
                wall = time.perf_counter() - t0
                return wall, process_cpu(p.pid), s.split()[-1][:-1]
        raise RuntimeError("snakemake ended before starting a job:\n" + "".join(tail))
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def main_dag(cmd: list[str], prepare, repeats: int) -> tuple[float, float, str]:
    """The least (wall, CPU) of ``repeats`` starts of the main snakemake, each in a
    workspace ``prepare()`` has just made (a killed run may leave files)."""
    runs = []
    for _ in range(repeats):
        prepare()
        runs.append(until_first_job(cmd))
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[0][2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=128, help="N of the large runs")
    ap.add_argument("--small-jobs", type=int, default=12, help="N to compare with")
    ap.add_argument("--archives", type=int, help="egs archives (default: max(100, N))")
    ap.add_argument("--early", type=int, default=5, help="index t of the early job")
    ap.add_argument("--resume", type=int, help="resume point (default: 0.9 × iterations)")
    ap.add_argument("--repeats", type=int, default=6, help="start-ups per job (least counts)")
    ap.add_argument("--main-repeats", type=int, default=2, help="main DAG starts (least counts)")
    args = ap.parse_args()
    small, big = args.small_jobs, args.jobs
    archives = args.archives or max(100, big, small)
    resume = args.resume or int(0.9 * args.iterations)
    with tempfile.TemporaryDirectory(prefix="bench_scale.") as tmp_name:
        tmp = Path(tmp_name)
        upstream = upstream_workspace(tmp)
        overlays = {n: overlay_for(tmp, args.iterations, n, archives) for n in (small, big)}
        jobs = {}  # (N, "early" | "late") -> (workspace, t of the job)
        for n in (small, big):
            print(f"N = {n}: writing the finished iterations ...", flush=True)
            ws = tmp / f"early{n}"
            last = fabricate(upstream, ws, overlays[n], archives, args.early - 1).num_iters
            jobs[n, "early"] = ws, args.early
            jobs[n, "late"] = tmp / f"late{n}", last
        fabricate(upstream, tmp / f"late{small}", overlays[small], archives, last - 1)

        # the main DAG of N = --jobs: fresh, and resumed with and without the memo
        ws, memo = tmp / f"late{big}", tmp / f"late{big}" / ".snakemake"
        fresh = tmp / "fresh"

        def new_fresh():
            shutil.rmtree(fresh, ignore_errors=True)
            fabricate(upstream, fresh, overlays[big], archives, 0)

        def with_memo():  # as the main snakemake of the interrupted run left it
            shutil.rmtree(memo, ignore_errors=True)
            fabricate(upstream, ws, overlays[big], archives, resume, start=resume + 1)

        # blocks sized by jobs alone (before run.block_edges): 600 // N iterations, whose
        # DAG holds 4 N jobs and 4 N² edges instead of the edge bound's N and N²
        by_jobs = tmp / "blocks_by_jobs_alone.yaml"
        by_jobs.write_text(yaml.safe_dump({"run": {"block_edges": 10**9}}))
        runs = [
            ("fresh run", fresh, new_fresh, []),
            (f"resume at iteration {resume}", ws, with_memo, []),
            ("  the same, no memo", ws, lambda: shutil.rmtree(memo, ignore_errors=True), []),
            ("  blocks by run.block_jobs alone", ws, with_memo, [str(by_jobs)]),
            ("fresh run, blocks by run.block_jobs alone", fresh, new_fresh, [str(by_jobs)]),
        ]
        print(f"N = {big}: the main DAG ...", flush=True)
        fabricate(upstream, ws, overlays[big], archives, resume)
        main_dags = [
            (
                label,
                main_dag(
                    [*snakemake_cmd(d, TINY, overlays[big]), *more, "--cores", "2"],
                    prep,
                    args.main_repeats,
                ),
            )
            for label, d, prep, more in runs
        ]
        shutil.rmtree(fresh)
        shutil.rmtree(memo)
        fabricate(upstream, ws, overlays[big], archives, last - 1, start=resume + 1)

        print("cluster jobs' start-ups ...", flush=True)
        cmds = {k: job_cmd(ws, overlays[k[0]], t) for k, (ws, t) in jobs.items()}
        startup = {k: float("inf") for k in cmds}
        for r in range(args.repeats + 1):  # interleaved: a load that comes and goes hits all
            for k, cmd in cmds.items():
                cpu = cpu_of(cmd)
                if r:  # the first round warms the file cache
                    startup[k] = min(startup[k], cpu)

        print(f"\n{last} iterations, {archives} archives; a cluster job's start-up, CPU s")
        print(f"(least of {args.repeats}; the job's own snakemake, as a dry run)\n")
        print(f"{'':>12} {f't = {args.early}':>10} {f't = {last}':>10} {'t ratio':>9}")
        for n in (small, big):
            e, late = startup[n, "early"], startup[n, "late"]
            print(f"{f'N = {n}':>12} {e:10.2f} {late:10.2f} {late / e:8.2f}x")
        ratios = [startup[big, k] / startup[small, k] for k in ("early", "late")]
        print(f"{f'N {big} / {small}':>12} {ratios[0]:9.2f}x {ratios[1]:9.2f}x")
        print(f"targets: t = {last} <= 1.2 x t = {args.early}; N = {big} <= 1.0 x N = {small}\n")
        print(
            f"main DAG, {last} x {big}, until the first job starts (least of {args.main_repeats})"
        )
        for label, (wall, cpu, rule) in main_dags:
            print(f"  {label:<26} {wall:6.2f} s wall {cpu:6.2f} s CPU   first job: {rule}")
        print("target: <= 15 s")


if __name__ == "__main__":
    main()
