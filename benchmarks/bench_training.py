"""Training speed: the real job against a bare PyTorch loop, per-job overhead, DAG build time.

Printed side by side in one run (ratios against baselines measured in the same run; the
machine is shared, so absolute times are not comparable between runs):

1. throughput of the real training job (``paravg.train_job.train_one_job``: egs read
   from a memory-mapped archive on disk, frame selection, buffer shuffle, max-change,
   plain SGD) against a bare PyTorch loop over the same model and the same frames held
   in memory as float32 tensors (forward, summed loss, backward, p -= lr·grad).
   Target: ratio >= 0.9.
1b. the real job (SGD and NG-SGD) computing only the time steps the output needs, against
   the same job computing every layer at every position (the computation before).
2. the fixed cost of one job (process start, imports, model and archive loading) against
   its training time, at the default demo archive size, measured by running the same
   calls as ``scripts/train_job.py`` in a fresh Python process.
3. ``snakemake --dry-run`` DAG build time for 100, 1,000 and 2,500 iterations of 12 jobs
   (needs a workspace whose egs exist: ``--workspace DIR`` or a tiny one is built first);
   the DAG is expanded a block at a time, so the time no longer grows with the run.

    .venv/bin/python benchmarks/bench_training.py [--num-egs 20000] [--skip-dag]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from _harness import (
    FPE,
    TINY,
    build_upstream,
    default_model_cfg,
    fresh_model,
    run_snakemake,
    write_archive,
)
from _harness import training_spec as spec

from paravg.config import REPO_CONFIG
from paravg.egs import EgsArchive
from paravg.io import save_torch_atomic
from paravg.layout import Layout
from paravg.nnet.context import model_context
from paravg.nnet.model_file import model_to_file_dict
from paravg.plan import experiment_plans
from paravg.progress import load_config
from paravg.train_job import train_one_job


def real_job_seconds(
    cfg: dict, prefix: Path, minibatch: int, ng: bool = False, full_window: bool = False
) -> tuple[float, float]:
    model = fresh_model(cfg, ng, full_window)
    t0 = time.perf_counter()
    stats = train_one_job(model, EgsArchive(prefix), spec(minibatch), torch.device("cpu"))
    return time.perf_counter() - t0, stats["frames"]


def bare_loop_seconds(cfg: dict, prefix: Path, minibatch: int) -> tuple[float, float]:
    """Same model, same frames, tensors already in memory, no shuffle, no max-change."""
    arch = EgsArchive(prefix)
    left, right = model_context(cfg)
    k = 3
    lo = arch.left_context + k - left
    feats = torch.from_numpy(np.asarray(arch.feats[:, lo : lo + left + 1 + right], np.float32))
    ivecs = torch.from_numpy(np.asarray(arch.ivectors, np.float32))
    labels = torch.from_numpy(np.asarray(arch.labels[:, k], np.int64))
    model = fresh_model(cfg)
    n = (feats.shape[0] // minibatch) * minibatch
    t0 = time.perf_counter()
    for s in range(0, n, minibatch):
        logp = model(feats[s : s + minibatch], ivecs[s : s + minibatch])[:, 0]
        loss = -logp.gather(1, labels[s : s + minibatch, None]).sum()
        for p in model.parameters():
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(1e-3 * p.grad)
    return time.perf_counter() - t0, float(n)


OVERHEAD_SNIPPET = """
import time, json, sys
t0 = time.perf_counter()
import torch
from paravg.devices import select_device
from paravg.nnet.model_file import load_model_file
from paravg.train_job import JobSpec, run_train_job
torch.set_num_threads(1)
spec = JobSpec(iteration=1, job=0, learning_rate=1e-3, minibatch_size={mb},
               max_param_change=2.0, frame=3, shuffle_buffer_size=5000)
with select_device("cpu") as dev:
    t1 = time.perf_counter()
    start = load_model_file("{model}")
    run_train_job(start, "{prefix}", "{out}", "{out}.json", spec, {{"enabled": {ng}}}, dev)
t2 = time.perf_counter()
print(json.dumps({{"startup": t1 - t0, "job": t2 - t1}}))
"""


def per_job_overhead(cfg: dict, workdir: Path, num_egs: int, minibatch: int, ng: bool) -> dict:
    left, right = model_context(cfg)
    prefix = workdir / f"small{num_egs}"
    write_archive(prefix, num_egs, left, right)
    model_path = workdir / "0.pt"
    save_torch_atomic(model_path, model_to_file_dict(fresh_model(cfg)))
    code = OVERHEAD_SNIPPET.format(
        mb=minibatch, model=model_path, prefix=prefix, out=workdir / "out.pt", ng=ng
    )
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    total = time.perf_counter() - t0
    inner = json.loads(proc.stdout.strip().splitlines()[-1])
    train, _ = real_job_seconds(cfg, prefix, minibatch, ng)
    return {"total": total, "imports": inner["startup"], "train": train, "overhead": total - train}


def dag_build_times(workspace: Path | None, iterations: list[int]) -> list[tuple[int, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench_dag_"))
    try:
        if workspace is None:
            workspace = tmp / "upstream"
            workspace.mkdir()
            build_upstream(workspace)
        ws = tmp / "ws"
        shutil.copytree(workspace, ws, symlinks=True)
        config = load_config([REPO_CONFIG, TINY])
        info_path = Path(Layout.in_workdir(ws, config["results"]).egs_info())
        info = json.loads(info_path.read_text())
        info["num_archives"] = 100
        info_path.write_text(json.dumps(info))
        out = []
        for n in iterations:
            overlay = ws / "overlay.yaml"
            trainer = {
                "num_epochs": n * 24 / (2 * 100 * FPE),  # aims at n iterations of 12 jobs
                "num_jobs_initial": 12,
                "num_jobs_final": 12,
            }
            overlay.write_text(yaml.safe_dump({"trainer": trainer}))
            run_config = load_config([REPO_CONFIG, TINY, {"trainer": trainer}])
            plan = experiment_plans(run_config, info)["default"]
            args = ["-n", "--quiet", "rules", "--cores", "2"]
            wall = run_snakemake(ws, args, configfiles=[TINY, overlay]).wall
            out.append((plan.num_iters, wall))  # the plan's count
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num-egs", type=int, default=20000)
    ap.add_argument("--minibatch", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--demo-archive-egs",
        type=int,
        default=2400,
        help="egs per archive of the default demo config",
    )
    ap.add_argument("--workspace", type=Path, default=None)
    ap.add_argument("--skip-dag", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg = default_model_cfg()
    left, right = model_context(cfg)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        prefix = d / "egs.0"
        write_archive(prefix, args.num_egs, left, right)
        real, bare = [], []
        for _ in range(args.repeats):  # interleaved: load changes hit both alike
            s, f = real_job_seconds(cfg, prefix, args.minibatch)
            real.append(f / s)
            s, f = bare_loop_seconds(cfg, prefix, args.minibatch)
            bare.append(f / s)
        r, b = statistics.median(real), statistics.median(bare)
        print(
            f"\n1. training throughput (default model, 1 thread, minibatch {args.minibatch}, CPU)"
        )
        print(f"{'path':<48}{'frames/s':>12}{'ratio':>8}")
        print(f"{'bare PyTorch loop, tensors in memory':<48}{b:>12.0f}{1.0:>8.2f}")
        print(f"{'real job (egs from disk, shuffle, max-change)':<48}{r:>12.0f}{r / b:>8.2f}")
        print("   target: ratio >= 0.9")

        print("\n1b. the job computing only the time steps the output needs (as Kaldi)")
        print("    against every layer at every position (before), same run")
        print(f"{'optimiser':<10}{'full window fr/s':>18}{'needed only fr/s':>18}{'speed-up':>10}")
        for ng in (False, True):
            full, needed = [], []
            for _ in range(args.repeats):
                s, f = real_job_seconds(cfg, prefix, args.minibatch, ng, full_window=True)
                full.append(f / s)
                s, f = real_job_seconds(cfg, prefix, args.minibatch, ng)
                needed.append(f / s)
            a, b = statistics.median(full), statistics.median(needed)
            name = "NG-SGD" if ng else "SGD"
            print(f"{name:<10}{a:>18.0f}{b:>18.0f}{b / a:>10.2f}")

        print(f"\n2. fixed per-job cost at the demo archive size ({args.demo_archive_egs} egs)")
        print(
            f"{'optimiser':<10}{'total s':>10}{'imports s':>11}{'training s':>12}"
            f"{'overhead s':>12}{'overhead/training':>19}"
        )
        for ng in (False, True):
            o = per_job_overhead(cfg, d, args.demo_archive_egs, args.minibatch, ng)
            name = "NG-SGD" if ng else "SGD"
            print(
                f"{name:<10}{o['total']:>10.2f}{o['imports']:>11.2f}{o['train']:>12.2f}"
                f"{o['overhead']:>12.2f}"
                f"{o['overhead'] / o['train']:>19.2f}"
            )
    if not args.skip_dag:
        print("\n3. dry-run DAG build time of a fresh run, 12 jobs per iteration")
        print("   (the DAG holds one block of ~run.block_jobs jobs: see bench_scale.py)")
        times = dag_build_times(args.workspace, [100, 1000, 2500])
        print(f"{'iterations':>10}{'seconds':>10}{'vs 100 iterations':>19}")
        for n, t in times:
            print(f"{n:>10}{t:>10.1f}{t / times[0][1]:>19.2f}")


if __name__ == "__main__":
    main()
