"""The model families side by side: training cost per frame, NG-SGD against plain SGD,
peak memory per job, and (from a finished run) frame accuracy, WER and cost on the demo.

Part 1, in this run, on one synthetic archive per family (the demo's dimensions: 40
MFCC + 40 i-vector dims, the demo's number of pdfs, frames-per-eg 8, minibatch 256, one
output frame per eg as a Kaldi DNN job trains): the step time per frame of each family
with plain SGD and with NG-SGD, as ratios against the TDNN with NG-SGD (the default);
the peak memory of one job, each measured in a fresh Python process (its maximum
resident set, and what the job added after the imports and the model were built).

Part 2, with ``--results DIR`` (a finished run of
``config/experiments/model_families.yaml``): for each experiment the parameters, the
final frame accuracy and log-prob on the valid and train subsets, the test WER at the
dev set's best LMWT/WIP, and the CPU time of its train jobs and of its decode.

    .venv/bin/python benchmarks/bench_model_families.py [--results results/model_families]
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
FEAT_DIM, IVEC_DIM, NUM_TARGETS, FPE = 40, 40, 200, 8


def family_configs() -> dict[str, dict]:
    """The model configs of ``config/experiments/model_families.yaml``, resolved."""
    from paravg.config import REPO_CONFIG, deep_merge, resolved_experiments, validate_config

    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    families = yaml.safe_load((REPO / "config/experiments/model_families.yaml").read_text())
    cfg = validate_config(deep_merge(cfg, families))
    return {name: exp["model"] for name, exp in resolved_experiments(cfg).items()}


def write_archive(prefix: Path, n: int, left: int, right: int) -> None:
    from paravg.egs.archive import ArchiveMeta, ArchiveWriter

    meta = ArchiveMeta(n, FPE, left, right, FEAT_DIM, IVEC_DIM, "float16")
    rng = np.random.default_rng(0)
    with ArchiveWriter(prefix, meta) as w:
        w.arrays["feats"][:] = rng.standard_normal((n, meta.window, FEAT_DIM)).astype(np.float16)
        w.arrays["labels"][:] = rng.integers(0, NUM_TARGETS, (n, FPE))
        w.arrays["weights"][:] = 1.0
        w.arrays["ivectors"][:] = rng.standard_normal((n, IVEC_DIM))
        w.set_keys([f"u-{i}" for i in range(n)])


def one_job(cfg: dict, prefix: str, ng: bool, repeats: int) -> dict:
    """Train one job ``repeats`` times (a fresh model each time) in this process: its
    seconds per frame, this process's peak RSS and the RSS before the job (``--job``)."""
    import resource

    import torch

    from paravg.egs import EgsArchive
    from paravg.nnet.model_file import new_model
    from paravg.optim.ngsgd import make_affine_factory
    from paravg.plan import JobSpec
    from paravg.train_job import train_one_job

    torch.set_num_threads(1)
    factory = make_affine_factory({"enabled": ng})
    new_model(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, factory).init_parameters(seed=0)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # imports and one model
    times, model = [], None
    for _ in range(repeats):
        model = new_model(cfg, FEAT_DIM, IVEC_DIM, NUM_TARGETS, factory)
        model.init_parameters(seed=0)
        spec = JobSpec(
            iteration=1,
            job=0,
            learning_rate=1e-3,
            minibatch_size=256,
            max_param_change=2.0,
            frame=3,
            shuffle_buffer_size=5000,
            dropout_proportion=0.2 if cfg.get("family") == "tdnnf" else 0.0,
            l2_regularize_factor=0.5,
        )
        t0 = time.perf_counter()
        stats = train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
        times.append((time.perf_counter() - t0) / stats["frames"])
    return {
        "s_per_frame": times,
        "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "before_job_kb": base,
        "params": sum(p.numel() for p in model.parameters()),
    }


def measure_job(cfg: dict, prefix: Path, ng: bool, repeats: int) -> dict:
    """One job configuration in a fresh Python process (its own peak memory)."""
    job = json.dumps({"cfg": cfg, "prefix": str(prefix), "ng": ng, "repeats": repeats})
    out = subprocess.run(
        [sys.executable, __file__, "--job", job],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def training_cost(num_egs: int, repeats: int) -> None:
    from paravg.nnet.context import model_context

    configs = {}
    for name, cfg in family_configs().items():  # one row per distinct model (not per seed)
        if all(cfg != other for other in configs.values()):
            configs[name] = cfg
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cfg in configs.items():
            left, right = model_context(cfg)
            prefix = Path(tmp) / f"{name}"
            write_archive(prefix, num_egs, left, right)
            for ng in (False, True):
                rows[(name, ng)] = measure_job(cfg, prefix, ng, repeats)
    base = statistics.median(rows[("tdnn", True)]["s_per_frame"])
    print(
        f"\n## Training cost per frame ({num_egs} egs, minibatch 256, one thread, median of "
        f"{repeats})\n"
    )
    print(
        "| family | optimiser | params | µs / frame | × TDNN NG-SGD | NG / SGD | peak RSS MB "
        "| job's own MB |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (name, ng), r in rows.items():
        t = statistics.median(r["s_per_frame"])
        sgd = statistics.median(rows[(name, False)]["s_per_frame"])
        print(
            f"| {name} | {'NG-SGD' if ng else 'SGD'} | {r['params']:,} | {t * 1e6:.1f} "
            f"| {t / base:.2f} | {t / sgd:.2f} | {r['peak_kb'] / 1024:.0f} "
            f"| {(r['peak_kb'] - r['before_job_kb']) / 1024:.0f} |"
        )


def cpu_seconds(logs: list[Path]) -> float:
    """Sum of the CPU seconds of Snakemake ``benchmark:`` files (``cpu_time`` column)."""
    total = 0.0
    for path in logs:
        lines = path.read_text().splitlines()
        if len(lines) >= 2:
            header, values = lines[0].split("\t"), lines[1].split("\t")
            if "cpu_time" in header:
                total += float(values[header.index("cpu_time")])
    return total


def run_table(results: Path) -> None:
    """Per experiment and eval set: the row of ``results.tsv`` (frame accuracy,
    cross-entropy, WER at the tuning set's LMWT/WIP), the parameters, and the CPU seconds
    of the experiment's train jobs and of its decode jobs (Snakemake's benchmark files)."""
    print(f"\n## The demo run ({results})\n")
    print(
        "| experiment | params | set | frame accuracy | cross-entropy | WER % | train jobs "
        "CPU s | decode CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    rows = list(csv.DictReader((results / "results.tsv").open(), delimiter="\t"))
    bench = results / "benchmarks"
    for row in rows:
        name = row["experiment"]
        init = json.loads((results / "exp" / name / "init.json").read_text())
        train_cpu = cpu_seconds(sorted(bench.glob(f"train_job/{name}/**/*.tsv")))
        decode_cpu = cpu_seconds(sorted(bench.glob(f"decode*/{name}/**/*.tsv")))
        print(
            f"| {name} | {init['num_parameters']:,} | {row['set']} "
            f"| {float(row['frame_accuracy']):.4f} | {float(row['cross_entropy']):.4f} "
            f"| {float(row['wer']):.2f} ({row['wer_setting']}) | {train_cpu:.0f} "
            f"| {decode_cpu:.0f} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--num-egs", type=int, default=4096)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--results", type=Path, default=None)
    ap.add_argument("--skip-training", action="store_true")
    ap.add_argument("--job", help=argparse.SUPPRESS)  # internal: one job in this process
    args = ap.parse_args()
    if args.job:
        print(json.dumps(one_job(**json.loads(args.job))))
        return
    started = time.perf_counter()
    if not args.skip_training:
        training_cost(args.num_egs, args.repeats)
    if args.results:
        run_table(args.results)
    print(f"\n(benchmark wall time {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
