"""Sync methods side by side on the demo: held-out quality (± EMA) and straggler wall-clock.

Runs the real Snakefile in a scratch workspace (default ``/tmp/paravg_bench_sync``) on the
demo corpus with ``egs.samples_per_iter`` lowered so the demo has enough archives for
N = 4 jobs, then measures in one run:

1. **quality**: one ``snakemake`` command trains one experiment per sync method (average,
   bmuf, ring, random-ring, delay-by-one, d-psgd; N = 4 jobs from the first iteration, the same
   epochs, EMA enabled on all: it never feeds back, so each run gives both models) and
   evaluates each final model and its EMA model on the held-out test speakers: frame
   accuracy and log-probability per frame (−cross-entropy), with differences against
   ``average`` from the same run.
2. **stragglers**: for average, ring, random-ring and delay-by-one, the wall-clock of the
   whole training (first train job start → last model of the last iteration: ``<T>.pt``
   or ``consensus/<T>.pt``) with job 1 made ``--factor`` times slower
   (``simulate.straggler``) against the same run without, and the ratio. Each timed run is
   its own ``snakemake --cores N`` command on a fresh experiment (its ``0.pt`` built
   beforehand, untimed); runs are interleaved over ``--repeats``. Also printed: when the
   fast jobs (all but the straggler) finished their last iteration, which shows how far
   the DAG edges let them run ahead of the slow one.

    .venv/bin/python benchmarks/bench_sync.py [--part quality|straggler|all] [--cores 4]
        [--epochs 2] [--straggler-epochs 1] [--repeats 1] [--factor 3] [--demo-minutes 20]
        [--workdir DIR]

The numbers are noisy on a shared 2-core machine; compare ratios within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
METHODS = ["average", "bmuf", "ring", "random-ring", "delay-by-one", "d-psgd"]
STRAGGLER_METHODS = ["average", "ring", "random-ring", "delay-by-one"]
SLOW_JOB = 1


def base_overlay(args) -> dict:
    """The demo, with archives small enough for N jobs, and the benchmark's experiments."""
    jobs = {"num_jobs_initial": args.jobs, "num_jobs_final": args.jobs}
    trainer = {**jobs, "num_epochs": args.epochs}
    return {
        "demo": {"minutes": args.demo_minutes},
        "egs": {"samples_per_iter": args.samples_per_iter},
        "trainer": trainer,
        "experiments": {m: {"sync": {"method": m, "ema": {"enabled": True}}} for m in METHODS},
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


# ---------------------------------------------------------------- part 1: quality
def synced_path(e: Path, method: str, t: int) -> Path:
    from paravg.sync.registry import get_method

    kind = get_method(method).synced_model
    if t == 0 or kind == "start":
        return e / f"{t}.pt"
    return e / ("bmuf" if kind == "bmuf-global" else "consensus") / f"{t}.pt"


def final_without_ema(ws: Path, method: str, args) -> dict:
    """What the final model would be without the EMA candidate: the same combination
    (``paravg.combine``) over the synced models only, evaluated the same way (priors do not
    change frame accuracy or log-probabilities)."""
    from paravg.combine import combine_models
    from paravg.config import deep_merge, experiment_config, validate_config
    from paravg.egs import EgsInfo
    from paravg.evaluate import evaluate_set
    from paravg.schedule import Schedule

    r = Path("results")  # scp files name their arks relative to the workspace
    e = r / "exp" / method
    info = EgsInfo.load(r / "egs" / "info.json")
    cfg = deep_merge(
        yaml.safe_load((REPO / "config" / "config.yaml").read_text()), base_overlay(args)
    )
    validate_config(cfg)
    trainer = experiment_config(cfg, method)["trainer"]
    mmc = cfg["combine"]["max_models_combine"]
    sched = Schedule.from_config(trainer, info.num_archives, info.frames_per_eg, mmc)
    models = [synced_path(e, method, t) for t in sched.models_to_combine()]
    out = Path("no_ema") / method
    evals = cfg["combine"]["max_objective_evaluations"]
    combine_models(models, r / "egs" / "combine", evals, out / "combined.pt", out / "combine.json")
    ivec = r / "ivector" / "test"
    return evaluate_set(
        out / "combined.pt",
        r / "feats" / "test" / "feats.scp",
        r / "data" / "test" / "targets.scp",
        out / "eval.json",
        ivectors_scp=ivec / "ivector_online.scp",
        period_path=ivec / "ivector_period",
    )


def quality(ws: Path, args) -> list[dict]:
    overlay = base_overlay(args)
    targets = []
    for m in METHODS:
        targets += [f"results/exp/{m}/eval/test.json", f"results/exp/{m}/eval/ema/test.json"]
    wall = snakemake(ws, overlay, *targets, cores=args.cores)
    rows = []
    for m in METHODS:
        e = ws / "results" / "exp" / m
        final = json.loads((e / "eval" / "test.json").read_text())
        ema = json.loads((e / "eval" / "ema" / "test.json").read_text())
        with contextlib.chdir(ws):
            plain = final_without_ema(ws, m, args)
        rows.append(
            {
                "method": m,
                "acc": plain["frame_accuracy"],
                "logp": -plain["cross_entropy"],
                "final_acc": final["frame_accuracy"],
                "final_logp": -final["cross_entropy"],
                "ema_acc": ema["frame_accuracy"],
                "ema_logp": -ema["cross_entropy"],
                "frames": final["frames"],
            }
        )
    base = rows[0]
    iters = schedule_iters(ws, args, args.epochs)
    print(
        f"\n## Quality: held-out test speakers, N = {args.jobs} jobs, {args.epochs:g} epochs "
        f"({iters} iterations; the five trained in one command, {wall:.0f} s)\n"
    )
    print(
        "| method | frame acc | log-prob/frame | Δ acc vs average | Δ log-prob vs average "
        "| + EMA offered: acc | + EMA offered: log-prob | EMA alone: acc | EMA alone: log-prob |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['acc']:.4f} | {r['logp']:.4f} | {r['acc'] - base['acc']:+.4f} "
            f"| {r['logp'] - base['logp']:+.4f} | {r['final_acc']:.4f} | {r['final_logp']:.4f} "
            f"| {r['ema_acc']:.4f} | {r['ema_logp']:.4f} |"
        )
    print(
        f"\n{rows[0]['frames']} test frames. 'frame acc'/'log-prob': the final combination of "
        "the synced models (average: <t>.pt, bmuf: the global model, decentralized: the "
        "consensus); '+ EMA offered': final.pt of the pipeline, whose combination also had the "
        "EMA model (decay 0.9) as its newest candidate; 'EMA alone': ema/<T>.pt."
    )
    return rows


# ---------------------------------------------------------------- part 2: stragglers
def first_log_time(path: Path) -> float:
    m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)", path.read_text())
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def straggler_run(ws: Path, args, method: str, slow: bool, rep: int, iters: int) -> dict:
    name = f"strag-{method}-{'slow' if slow else 'none'}-{rep}"
    overlay = base_overlay(args)
    overlay["experiments"][name] = {
        "trainer": {"num_epochs": args.straggler_epochs},
        "sync": {"method": method},
    }
    overlay["simulate"] = {"straggler": {"job": SLOW_JOB if slow else -1, "factor": args.factor}}
    e = ws / "results" / "exp" / name
    if e.exists():
        shutil.rmtree(e)
    shutil.rmtree(ws / "logs" / "train_job" / name, ignore_errors=True)
    snakemake(ws, overlay, f"results/exp/{name}/0.pt", cores=args.cores)  # untimed
    last = f"{iters}.pt" if method in ("average", "bmuf") else f"consensus/{iters}.pt"
    wall = snakemake(ws, overlay, f"results/exp/{name}/{last}", cores=args.cores)
    start = min(first_log_time(p) for p in (ws / "logs" / "train_job" / name / "1").glob("*.log"))
    end = (e / last).stat().st_mtime
    fast = [
        (e / str(iters) / f"job{j}.json").stat().st_mtime - start
        for j in range(args.jobs)
        if j != SLOW_JOB
    ]
    return {"span": end - start, "wall": wall, "fast": statistics.mean(fast)}


def stragglers(ws: Path, args) -> None:
    iters = schedule_iters(ws, args, args.straggler_epochs)
    results: dict[tuple[str, bool], list[dict]] = {}
    for rep in range(args.repeats):
        for m in STRAGGLER_METHODS:
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
    for m in STRAGGLER_METHODS:
        a, b = med(m, False, "span"), med(m, True, "span")
        print(
            f"| {m} | {a:.1f} | {b:.1f} | {b / a:.2f}× | {a / base:.2f}× "
            f"| {med(m, True, 'fast'):.1f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["quality", "straggler", "all"], default="all")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/paravg_bench_sync"))
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--epochs", type=float, default=2.0, help="epochs of the quality runs")
    ap.add_argument("--straggler-epochs", type=float, default=1.0)
    ap.add_argument("--demo-minutes", type=float, default=20.0)
    ap.add_argument("--samples-per-iter", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--factor", type=float, default=3.0)
    args = ap.parse_args()
    ws = args.workdir
    ws.mkdir(parents=True, exist_ok=True)
    print(f"workspace {ws}: building the demo up to the egs ...", flush=True)
    wall = snakemake(ws, base_overlay(args), "egs_all", cores=min(args.cores, 2))
    print(f"  done in {wall:.0f} s", flush=True)
    if args.part in ("quality", "all"):
        quality(ws, args)
    if args.part in ("straggler", "all"):
        stragglers(ws, args)


if __name__ == "__main__":
    main()
