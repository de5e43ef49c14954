"""The GPU check: paravg's GPU path measured against the CPU in one short run.

    .venv/bin/python benchmarks/bench_gpu.py --device cuda      # a GPU machine, <= 8 min
    .venv/bin/python benchmarks/bench_gpu.py --device cpu --quick   # the suite's check

(``tools/gpu_check.sh`` wraps it.) Four parts, printed as one table of figures with the
device's value beside the CPU's:

(a) **pipeline**: the tiny pipeline (``tests/pipeline/tiny.yaml``) end to end with
    ``trainer.device`` set to the device and 4 training jobs per iteration, run with
    ``snakemake --cores 8`` and no ``--resources gpu`` bound, so that the 4 jobs of an
    iteration start together and share the GPU(s) through paravg's lock files
    (:mod:`paravg.devices`, one ``flock`` per GPU under ``$PARAVG_GPU_LOCK_DIR``, here a
    folder of the workspace). From the jobs' logs: how many trained on the device, how
    many waited for a lock, and the most jobs that held the device at the same moment
    (at most the number of GPUs: the locks work). Skipped with ``--quick``.
(b) **agreement**: one training job (``paravg.train_job.train_one_job``, NG-SGD, the
    demo TDNN and TDNN-F) from the same start model on the CPU and on the device; the
    max |θ_device − θ_cpu| over every parameter after the job, beside max |θ_cpu − θ_0|
    (how far the job moved the model). On ``--device cpu`` both runs are on the CPU and
    the difference must be 0 (a job is deterministic).
(c) **NG-SGD step**: ms per training step (forward, summed −log p, backward, every
    component's NG-SGD ``delta``, the update) of the demo TDNN and TDNN-F, minibatch 256
    egs, on the CPU and on the device (median of rounds; wall time, the device
    synchronised before and after each round).
(d) **job throughput**: frames/s of a whole training job (egs from a memory-mapped
    archive, shuffle, max-change, NG-SGD) on the CPU and on the device, each after one
    untimed job on its device (CUDA's start-up is not counted).

The models are the demo's: ``config/config.yaml``'s TDNN and
``config/experiments/model_families.yaml``'s TDNN-F, at the synthetic archives' dims
(40-dim features, 40-dim i-vectors, 40 targets). CPU figures use one torch thread, as a
training job does (``threads: 1`` on the rule).
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import torch
import yaml
from _harness import (
    FEAT_DIM,
    IVEC_DIM,
    NUM_TARGETS,
    REPO,
    TINY,
    run_snakemake,
    write_archive,
)

from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config
from paravg.egs import EgsArchive
from paravg.layout import Layout
from paravg.nnet.context import model_context
from paravg.nnet.model_file import new_model
from paravg.nnet.ng_affine import make_affine_factory
from paravg.plan import JobSpec
from paravg.progress import load_config
from paravg.train_job import train_one_job

FAMILIES_YAML = REPO / "config" / "experiments" / "model_families.yaml"
MINIBATCH = 256
LR = 1e-3
#: the pipeline part's overlay on the tiny config: 4 jobs every iteration (smaller
#: archives, so that there are at least 4)
PIPELINE_JOBS = 4


# ------------------------------------------------------------------ device
def require_device(name: str) -> torch.device:
    """``torch.device(name)``; for ``cuda``, exit with a message when torch sees no GPU."""
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit(
            f"bench_gpu: --device cuda, but torch sees no GPU (torch {torch.__version__}, "
            f"torch.version.cuda={torch.version.cuda}, "
            f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); run it on a "
            "machine with a GPU and a CUDA build of torch, or pass --device cpu"
        )
    return torch.device(name)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ------------------------------------------------------------------ models
def demo_models() -> dict[str, dict]:
    """The demo's TDNN (config/config.yaml) and TDNN-F (model_families.yaml), validated."""
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    families = yaml.safe_load(FAMILIES_YAML.read_text())
    exps = resolved_experiments(validate_config(deep_merge(cfg, families)))
    return {"tdnn": exps["tdnn"]["model"], "tdnnf": exps["tdnnf"]["model"]}


def start_model(cfg: dict):
    """The model of ``cfg`` with NG-SGD components, Kaldi's initialisation (seed 0) and a
    non-zero output layer (so that every layer gets a gradient), on the CPU."""
    model = new_model(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, make_affine_factory({"enabled": True}))
    model.init_parameters(seed=0)
    with torch.no_grad():
        model.output.weight.normal_(0.0, 0.05, generator=torch.Generator().manual_seed(0))
    return model


def job_spec() -> JobSpec:
    """Job 0 of iteration 1 on frame 3, minibatch 256, max-param-change 2 (as a job of
    the demo; no dropout, so that the device and the CPU draw nothing differently)."""
    return JobSpec(
        iteration=1,
        job=0,
        learning_rate=LR,
        minibatch_size=MINIBATCH,
        max_param_change=2.0,
        frame=3,
        shuffle_buffer_size=5000,
    )


def timed_job(model, prefix: Path, device: torch.device) -> tuple[float, float]:
    """Train ``model`` in place for one job on ``device``: (seconds, frames)."""
    sync(device)
    t0 = time.perf_counter()
    stats = train_one_job(model, EgsArchive(prefix), job_spec(), device)
    sync(device)
    return time.perf_counter() - t0, stats["frames"]


def max_abs_diff(a, b) -> float:
    """max |a − b| over every parameter of two models of the same config (the trained
    parameters; batch-norm statistics and other buffers are not compared)."""
    pb = dict(b.named_parameters())
    return max(
        (p.detach().cpu().double() - pb[k].detach().cpu().double()).abs().max().item()
        for k, p in a.named_parameters()
    )


def job_figures(cfg: dict, prefix: Path, device: torch.device) -> dict:
    """(b) and (d) for one model: one job on the CPU and one (after an untimed one) on
    ``device`` from the same start, each after an untimed one on its device."""
    start, cpu = start_model(cfg), torch.device("cpu")
    for warm in dict.fromkeys([device, cpu]):  # untimed: CUDA's context, kernels, caches
        timed_job(copy.deepcopy(start), prefix, warm)
    cpu_model = copy.deepcopy(start)
    cpu_s, frames = timed_job(cpu_model, prefix, cpu)
    dev_model = copy.deepcopy(start)
    dev_s, _ = timed_job(dev_model, prefix, device)
    return {
        "diff": max_abs_diff(dev_model, cpu_model),
        "moved": max_abs_diff(cpu_model, start),
        "cpu_fps": frames / cpu_s,
        "dev_fps": frames / dev_s,
    }


# ------------------------------------------------------------------ (c) NG-SGD steps
def step_ms(cfg: dict, device: torch.device, steps: int, rounds: int, warmup: int) -> float:
    """Median over ``rounds`` of the ms per NG-SGD training step of ``cfg``'s model on
    ``device`` (minibatch :data:`MINIBATCH` egs of one output frame, 4 minibatches
    cycled; ``warmup`` untimed steps first, past the preconditioners' start)."""
    gen = torch.Generator().manual_seed(0)
    model = start_model(cfg).to(device).train()
    comps = model.components()
    left, right = model_context(cfg)
    width = left + 1 + right
    batches = [
        (
            torch.randn(MINIBATCH, width, FEAT_DIM, generator=gen).to(device),
            torch.randn(MINIBATCH, IVEC_DIM, generator=gen).to(device),
            torch.randint(0, NUM_TARGETS, (MINIBATCH,), generator=gen).to(device),
        )
        for _ in range(4)
    ]

    def run(start: int, n: int) -> None:
        for i in range(start, start + n):
            feats, ivecs, labels = batches[i % len(batches)]
            for p in model.parameters():
                p.grad = None
            logp = model(feats, ivecs)[:, 0]
            (-logp.gather(-1, labels.unsqueeze(-1)).sum()).backward()
            deltas = [comp.delta(LR) for comp in comps]
            with torch.no_grad():
                for comp, ds in zip(comps, deltas, strict=True):
                    for param, d in zip(comp.update_params(), ds, strict=True):
                        param.add_(d)

    run(0, warmup)
    times = []
    for r in range(rounds):
        sync(device)
        t0 = time.perf_counter()
        run(warmup + r * steps, steps)
        sync(device)
        times.append((time.perf_counter() - t0) / steps)
    return 1e3 * statistics.median(times)


# ------------------------------------------------------------------ (a) pipeline
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _stamp(line: str) -> float | None:
    m = STAMP.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def job_intervals(log_dir: Path) -> tuple[list[tuple[float, float]], int, int]:
    """From the train_job logs under ``log_dir``: the (start, end) of each job's time on
    a GPU (from its "using cuda" line to its last line), the jobs that trained on a GPU
    and the jobs that waited for a lock."""
    intervals, on_gpu, waited = [], 0, 0
    for log in sorted(log_dir.rglob("*.log")):
        lines = log.read_text().splitlines()
        using = [line for line in lines if " using cuda" in line]
        if any("GPUs are in use" in line for line in lines):
            waited += 1
        if using:
            on_gpu += 1
            stamps = [s for s in map(_stamp, lines) if s is not None]
            intervals.append((_stamp(using[0]), stamps[-1]))
    return intervals, on_gpu, waited


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals that hold one moment (an end at the moment of a start does not
    overlap it)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def pipeline_figures(device: str, workdir: Path, cores: int, timeout_s: int) -> dict:
    """(a): the tiny pipeline in ``workdir`` with ``trainer.device: device`` and
    :data:`PIPELINE_JOBS` jobs per iteration, the GPU locks in ``workdir``/locks."""
    overlay = workdir / "gpu_check.yaml"
    trainer = {
        "device": device,
        "num_jobs_initial": PIPELINE_JOBS,
        "num_jobs_final": PIPELINE_JOBS,
    }
    overlay.write_text(yaml.safe_dump({"egs": {"samples_per_iter": 100}, "trainer": trainer}))
    os.environ["PARAVG_GPU_LOCK_DIR"] = str(workdir / "locks")
    args = ["--cores", str(cores), "--rerun-incomplete"]  # a --workdir run again after a kill
    run = run_snakemake(workdir, args, [TINY, overlay], timeout_s=timeout_s)
    config = load_config([REPO_CONFIG, TINY, overlay])
    logs = Path(Layout.in_workdir(workdir, config["results"]).log_dir("train_job"))
    intervals, on_gpu, waited = job_intervals(logs)
    jobs = len(list(logs.rglob("*.log")))
    return {
        "wall": run.wall,
        "jobs": jobs,
        "on_gpu": on_gpu,
        "waited": waited,
        "overlap": max_overlap(intervals),
    }


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--quick", action="store_true", help="no pipeline, small jobs (the test)")
    ap.add_argument("--num-egs", type=int, default=None, help="egs of the job's archive")
    ap.add_argument("--steps", type=int, default=None, help="timed NG-SGD steps per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cores", type=int, default=8, help="snakemake --cores of the pipeline")
    ap.add_argument("--workdir", type=Path, help="the pipeline's workspace (default: a temp)")
    ap.add_argument("--timeout", type=int, default=360, help="the pipeline's limit, seconds")
    args = ap.parse_args(argv)
    device = require_device(args.device)
    torch.set_num_threads(1)
    num_egs = args.num_egs or (600 if args.quick else 8000)
    steps = args.steps or (4 if args.quick else 40)
    warmup = 4 if args.quick else 16
    out: dict = {"device": str(device)}
    models = demo_models()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        tmp = Path(tmp)
        left = max(model_context(cfg)[0] for cfg in models.values())
        right = max(model_context(cfg)[1] for cfg in models.values())
        prefix = tmp / "egs.0"
        write_archive(prefix, num_egs, left, right)
        for name, cfg in models.items():
            print(f"{name}: one job on cpu and {device} ...", flush=True)
            out[name] = job_figures(cfg, prefix, device)
            print(f"{name}: NG-SGD steps ...", flush=True)
            out[name]["cpu_ms"] = step_ms(cfg, torch.device("cpu"), steps, args.rounds, warmup)
            out[name]["dev_ms"] = step_ms(cfg, device, steps, args.rounds, warmup)
        if not args.quick:
            workdir = args.workdir or tmp / "pipeline"
            workdir.mkdir(parents=True, exist_ok=True)
            print(f"tiny pipeline, trainer.device {args.device}, {PIPELINE_JOBS} jobs ...")
            out["pipeline"] = pipeline_figures(args.device, workdir, args.cores, args.timeout)
    print_table(out, args, num_egs, steps, time.perf_counter() - t_start)
    return out


def print_table(out: dict, args, num_egs: int, steps: int, seconds: float) -> None:
    dev = out["device"]
    print(f"\nGPU check on {dev} against the CPU (1 torch thread), {seconds:.0f} s")
    print(f"{'figure':<52}{'tdnn':>14}{'tdnnf':>14}")

    def row(label: str, key: str, fmt: str) -> None:
        print(f"{label:<52}" + "".join(f"{out[m][key]:>14{fmt}}" for m in ("tdnn", "tdnnf")))

    row("(b) max |θ_dev − θ_cpu| after one job", "diff", ".3g")
    row("(b) max |θ_cpu − θ_0| (the job's own move)", "moved", ".3g")
    row("(c) NG-SGD step ms, cpu", "cpu_ms", ".2f")
    row(f"(c) NG-SGD step ms, {dev}", "dev_ms", ".2f")
    for m in ("tdnn", "tdnnf"):
        out[m]["step_speedup"] = out[m]["cpu_ms"] / out[m]["dev_ms"]
        out[m]["fps_speedup"] = out[m]["dev_fps"] / out[m]["cpu_fps"]
    row("(c) speed-up (cpu ms / device ms)", "step_speedup", ".2f")
    row(f"(d) job frames/s, cpu ({num_egs} egs)", "cpu_fps", ".0f")
    row(f"(d) job frames/s, {dev}", "dev_fps", ".0f")
    row("(d) speed-up", "fps_speedup", ".2f")
    p = out.get("pipeline")
    if p is None:
        print("(a) tiny pipeline: skipped (--quick)")
    else:
        print(f"(a) tiny pipeline, trainer.device {args.device}, {PIPELINE_JOBS} jobs/iteration:")
        print(f"{'    wall s':<52}{p['wall']:>14.1f}")
        print(f"{'    training jobs':<52}{p['jobs']:>14d}")
        print(f"{'    jobs that trained on a GPU':<52}{p['on_gpu']:>14d}")
        print(f"{'    jobs that waited for a GPU lock':<52}{p['waited']:>14d}")
        print(f"{'    most jobs holding a GPU at once':<52}{p['overlap']:>14d}")
    print(f"minibatch {MINIBATCH} egs; NG-SGD step: median of {args.rounds} rounds x {steps} steps")


if __name__ == "__main__":
    main()
