"""Sync methods under a straggler: wall-clock of the training with one job made slower.

Runs the real Snakefile in a scratch workspace (default ``/tmp/paravg_bench_sync``) on the
demo corpus with ``egs.samples_per_iter`` lowered so the demo has enough archives for
N = 4 jobs. For average, ring, random-ring, delay-by-one and d-psgd, the wall-clock of the
whole training (first train job start → last model of the last iteration: ``<T>.pt`` or
``consensus/<T>.pt``) with job 1 made ``--factor`` times slower (``simulate.straggler``)
against the same run without, and the ratio. Each timed run is its own
``snakemake --cores N`` command on a fresh experiment (its ``0.pt`` built beforehand,
untimed); runs are interleaved over ``--repeats``. Also printed: when the fast jobs (all
but the straggler) finished their last iteration, which shows how far the DAG edges let
them run ahead of the slow one.

    .venv/bin/python benchmarks/bench_sync.py [--cores 4] [--epochs 1] [--repeats 1]
        [--factor 3] [--demo-minutes 20] [--methods average,ring,...] [--workdir DIR]

The quality of the methods (equally fast learners, held-out accuracy, the EMA) is
``config/experiments/sync_paper.yaml`` with ``benchmarks/bench_sync_paper.py``. The numbers
are noisy on a shared 2-core machine; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import yaml

from paravg.layout import Layout
from paravg.sync.registry import get_method

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
STRAGGLER_METHODS = ["average", "ring", "random-ring", "delay-by-one", "d-psgd"]
SLOW_JOB = 1


def base_overlay(args) -> dict:
    """The demo, with archives small enough for N jobs (the timed experiments are added)."""
    jobs = {"num_jobs_initial": args.jobs, "num_jobs_final": args.jobs}
    return {
        "demo": {"minutes": args.demo_minutes},
        "egs": {"samples_per_iter": args.samples_per_iter},
        "trainer": {**jobs, "num_epochs": args.epochs},
        "decode": {"enabled": False},
        "experiments": {"average": {}},
    }


def snakemake(ws: Path, overlay: dict, *targets: str, cores: int) -> float:
    """Run the Snakefile in ``ws`` with the overlay on ``targets``; return wall seconds."""
    cfg = ws / "overlay.yaml"
    cfg.write_text(yaml.safe_dump(overlay))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(ws)]
    cmd += ["--configfile", str(cfg), "--cores", str(cores), *targets]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"snakemake failed ({' '.join(targets)}):\n{proc.stdout[-5000:]}")
    return wall


def schedule_iters(ws: Path, args, epochs: float) -> int:
    from paravg.egs import EgsInfo
    from paravg.schedule import num_iters as kaldi_num_iters

    info = EgsInfo.load(ws / "results" / "egs" / "info.json")
    return kaldi_num_iters(epochs, info.num_archives, info.frames_per_eg, args.jobs, args.jobs)


def synced_model(method: str, exp: str, t: int) -> str:
    """The model after t iterations of ``exp`` (``<t>.pt``, ``consensus/<t>.pt``, …)."""
    return get_method(method).synced_model(Layout(), exp, t)


def first_log_time(path: Path) -> float:
    m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)", path.read_text())
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def straggler_run(ws: Path, args, method: str, slow: bool, rep: int, iters: int) -> dict:
    name = f"strag-{method}-{'slow' if slow else 'none'}-{rep}"
    overlay = base_overlay(args)
    overlay["experiments"] = {name: {"sync": {"method": method}}}
    overlay["simulate"] = {"straggler": {"job": SLOW_JOB if slow else -1, "factor": args.factor}}
    e = ws / "results" / "exp" / name
    if e.exists():
        shutil.rmtree(e)
    shutil.rmtree(ws / "logs" / "train_job" / name, ignore_errors=True)
    snakemake(ws, overlay, f"results/exp/{name}/0.pt", cores=args.cores)  # untimed
    last = synced_model(method, name, iters)
    wall = snakemake(ws, overlay, last, cores=args.cores)
    start = min(first_log_time(p) for p in (ws / "logs" / "train_job" / name / "1").glob("*.log"))
    end = (ws / last).stat().st_mtime
    fast = [
        (ws / Layout().job_stats(name, iters, j)).stat().st_mtime - start
        for j in range(args.jobs)
        if j != SLOW_JOB
    ]
    return {"span": end - start, "wall": wall, "fast": statistics.mean(fast)}


def stragglers(ws: Path, args) -> None:
    iters = schedule_iters(ws, args, args.epochs)
    results: dict[tuple[str, bool], list[dict]] = {}
    methods = args.methods.split(",")
    for rep in range(args.repeats):
        for m in methods:
            for slow in (False, True):
                r = straggler_run(ws, args, m, slow, rep, iters)
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
        f"{iters} iterations, snakemake --cores {args.cores}, median of {args.repeats}\n"
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
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--demo-minutes", type=float, default=20.0)
    ap.add_argument("--samples-per-iter", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--methods", default=",".join(STRAGGLER_METHODS), help="average first")
    args = ap.parse_args()
    ws = args.workdir
    ws.mkdir(parents=True, exist_ok=True)
    print(f"workspace {ws}: building the demo up to the egs ...", flush=True)
    wall = snakemake(ws, base_overlay(args), "egs_all", cores=min(args.cores, 2))
    print(f"  done in {wall:.0f} s", flush=True)
    stragglers(ws, args)


if __name__ == "__main__":
    main()
