"""How the upstream stages' CPU and peak memory grow with the corpus (issue 36).

Runs the upstream stages (target ``egs_all``: demo corpus → data → MFCC → i-vectors →
egs, no training) from nothing at two or more corpus sizes (``demo.minutes``; everything
else the default config) with Snakemake's local executor (a fresh Python per job), then
reads every job's own resource line from its log (``logs/<rule>/*.log``:
``job resources: cpu_s=… max_rss_mb=…``, written by the job at its end, see
``paravg/logs.py``: exact, where ``benchmark:`` TSVs sample every 0.5 s and miss short
jobs) and prints per stage, side by side:

* CPU seconds of all its jobs, at each size, and its growth exponent
  ``k = d log CPU / d log size`` between the two largest sizes (1: linear in the corpus);
* peak RSS of its largest job (MiB) at each size and its exponent (0: bounded, the target
  of issue 36 for every stage).

Sizes are the training audio in hours (``results/data/train/report.json``).

Then, at the largest size, each rule's declared resources (``mem_mb`` and ``runtime``
from ``paravg/resources.py`` through the Dag, which reads each job's share of the corpus
from the workspace's reports) beside the largest measured figures of its jobs: the peak
RSS over ``mem_mb`` and CPU seconds over ``runtime`` x 60, each at most 1 where the
formula holds (the benchmark-size check of ``tests/pipeline/test_resources.py``).

    .venv/bin/python benchmarks/bench_data_scale.py                  # 20 and 60 minutes
    .venv/bin/python benchmarks/bench_data_scale.py --minutes 10 30 --keep /tmp/scale
    .venv/bin/python benchmarks/bench_data_scale.py --minutes 10 30 --keep /tmp/scale --reuse
    .venv/bin/python benchmarks/bench_data_scale.py --minutes 10 30 --keep /tmp/scale --no-run

About 3 minutes of 2 cores at 20 + 60 minutes (half of it the TTS demo corpus).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from paravg.config import REPO_CONFIG, deep_merge, validate_config  # noqa: E402
from paravg.dag import Dag  # noqa: E402
from paravg.logs import read_job_resources  # noqa: E402
from paravg.resources import JOB_SHARE  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run_size(ws: Path, minutes: float, cores: int, timeout_s: int) -> float:
    """Build ``egs_all`` in ``ws`` at ``minutes`` of demo audio; returns the wall seconds."""
    ws.mkdir(parents=True, exist_ok=True)
    overlay = ws / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"demo": {"minutes": minutes}}))
    cmd = [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(ws)]
    cmd += ["--configfile", str(overlay), "--cores", str(cores), "egs_all"]
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s
    )
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        (ws / "snakemake.out").write_text(proc.stdout)
        raise SystemExit(
            f"snakemake at {minutes} min failed (exit {proc.returncode}; its output: "
            f"{ws / 'snakemake.out'}):\n{proc.stdout[-3000:]}"
        )
    return wall


def stage_resources(ws: Path) -> dict[str, dict]:
    """Per rule: jobs, summed CPU seconds, largest peak RSS, jobs without a resource line.
    A rule's logs are every ``*.log`` under ``logs/<rule>/``, at any depth (the GMM
    stages log per model: ``logs/gmm_acc/mono/3.1.log``)."""
    out: dict[str, dict] = {}
    logs = ws / "logs"
    for log in sorted(logs.rglob("*.log")):
        rule = log.relative_to(logs).parts[0]
        if rule == log.name:  # a log beside the rules' folders
            continue
        s = out.setdefault(rule, {"jobs": 0, "cpu_s": 0.0, "max_rss_mb": 0.0, "missing": 0})
        s["jobs"] += 1
        r = read_job_resources(log)
        if r is None:
            s["missing"] += 1
            continue
        s["cpu_s"] += r["cpu_s"]
        s["max_rss_mb"] = max(s["max_rss_mb"], r["max_rss_mb"])
    return out


def declared_table(ws: Path) -> tuple[str, bool]:
    """Markdown table: per rule with a formula, the largest job's measured peak RSS and
    CPU s beside its declared ``mem_mb`` and ``runtime`` (the ratios: at most 1 where the
    formula holds); and whether every job's figures held."""
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    cfg = deep_merge(cfg, yaml.safe_load((ws / "overlay.yaml").read_text()))
    dag = Dag(validate_config(deep_merge(cfg, {"results": str(ws / "results")})))
    lines = [
        "| stage | peak RSS MiB | mem_mb | RSS / mem_mb | CPU s | runtime min | CPU / runtime |",
        "|---|---|---|---|---|---|---|",
    ]
    holds = True
    for rule in sorted(JOB_SHARE, key=lambda r: _ORDER.index(r) if r in _ORDER else 99):
        rows = []
        for log in sorted((ws / "logs" / rule).rglob("*.log")):  # the GMM rules': per model
            r = read_job_resources(log)
            if r is None:
                continue
            stem = log.relative_to(ws / "logs" / rule).with_suffix("")
            set_ = stem.parts[0].split(".")[0] if JOB_SHARE[rule][0] == "set" else None
            rows.append(
                (r["max_rss_mb"], dag.mem_mb(rule, set_), r["cpu_s"], dag.runtime(rule, set_))
            )
        if not rows:
            continue
        mem = max(rows, key=lambda x: x[0] / x[1])
        cpu = max(rows, key=lambda x: x[2] / x[3])
        holds &= all(rss <= mb and c <= 60 * m for rss, mb, c, m in rows)
        lines.append(
            f"| {rule} | {mem[0]:.0f} | {mem[1]} | {mem[0] / mem[1]:.3f} | {cpu[2]:.1f} | "
            f"{cpu[3]} | {cpu[2] / (60 * cpu[3]):.4f} |"
        )
    return "\n".join(lines), holds


def training_hours(ws: Path) -> float:
    report = json.loads((ws / "results" / "data" / "train" / "report.json").read_text())
    return report["duration_s_checked"] / 3600.0


def exponent(a: float, b: float, size_a: float, size_b: float) -> str:
    if a <= 0 or b <= 0 or size_a == size_b:
        return "–"
    return f"{math.log(b / a) / math.log(size_b / size_a):.2f}"


def table(sizes: list[tuple[float, float, float]], stats: list[dict[str, dict]]) -> str:
    """Markdown table: per stage CPU s and peak RSS MiB at each size, with exponents."""
    rules = sorted({r for s in stats for r in s}, key=lambda r: min(_order(s, r) for s in stats))
    hours = [h for _, h, _ in sizes]
    cols = "/".join(f"{m:g}" for m, _, _ in sizes)
    lines = [
        f"| stage | jobs | CPU s ({cols} min) | k CPU | peak RSS MiB ({cols} min) | k RSS |",
        "|---|---|---|---|---|---|",
    ]
    for rule in rules:
        per = [
            s.get(rule, {"jobs": 0, "cpu_s": 0.0, "max_rss_mb": 0.0, "missing": 0}) for s in stats
        ]
        jobs = "/".join(str(p["jobs"]) for p in per)
        missing = sum(p["missing"] for p in per)
        cpu = "/".join(f"{p['cpu_s']:.1f}" for p in per)
        rss = "/".join(f"{p['max_rss_mb']:.0f}" for p in per)
        k_cpu = exponent(per[-2]["cpu_s"], per[-1]["cpu_s"], hours[-2], hours[-1])
        k_rss = exponent(per[-2]["max_rss_mb"], per[-1]["max_rss_mb"], hours[-2], hours[-1])
        note = f" ({missing} logs without a resource line)" if missing else ""
        lines.append(f"| {rule}{note} | {jobs} | {cpu} | {k_cpu} | {rss} | {k_rss} |")
    return "\n".join(lines)


def extrapolation(
    sizes: list[tuple[float, float, float]], stats: list[dict[str, dict]], hours: float
) -> str:
    """Markdown table: per stage, from the two largest sizes, the growth of the largest
    job's peak RSS per training hour (nj as configured) and both figures carried linearly
    to ``hours`` of training audio (CPU: all the stage's jobs, at the largest size's CPU
    per hour; RSS: the largest job, its peak + the growth per hour x the hours added)."""
    (_, h1, _), (_, h2, _) = sizes[-2], sizes[-1]
    rules = sorted(set(stats[-1]), key=lambda r: _order(stats[-1], r))
    lines = [
        f"| stage | CPU s per training hour | CPU h at {hours:g} h | RSS growth MB per "
        f"training hour | peak RSS at {hours:g} h (MB) |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        a = stats[-2].get(rule, {"cpu_s": 0.0, "max_rss_mb": 0.0})
        b = stats[-1][rule]
        slope = (b["max_rss_mb"] - a["max_rss_mb"]) / (h2 - h1)
        per_hour = b["cpu_s"] / h2
        at = b["max_rss_mb"] + max(slope, 0.0) * (hours - h2)
        lines.append(
            f"| {rule} | {per_hour:.1f} | {per_hour * hours / 3600:.1f} | {slope:.2f} | {at:,.0f} |"
        )
    return "\n".join(lines)


_ORDER = [
    "demo_corpus",
    "prepare_data",
    "check_data_sets",
    "compute_features",
    "merge_features",
    "compute_cmvn",
    "ivector_pca",
    "ubm_init",
    "ubm_gselect",
    "ubm_acc",
    "ubm_est",
    "extractor_init",
    "extractor_post",
    "extractor_acc",
    "extractor_est",
    "extract_ivectors",
    "merge_ivectors",
    "egs",
    "egs_split",
    "egs_archive",
    "egs_subsets",
    "gmm_dict",
    "gmm_lang",
    "gmm_feats",
    "gmm_mono_init",
    "gmm_align_equal",
    "gmm_acc",
    "gmm_est",
    "gmm_realign",
    "gmm_mono_align_si",
    "gmm_tree_acc",
    "gmm_tree",
    "gmm_convert_ali",
    "gmm_align_set",
    "gmm_targets",
]


def _order(stats: dict, rule: str) -> int:
    return _ORDER.index(rule) if rule in _ORDER else len(_ORDER)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--minutes", type=float, nargs="+", default=[20, 60], help="demo.minutes, 2 or more"
    )
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores")
    ap.add_argument("--keep", type=Path, help="build the workspaces here and keep them")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per size")
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="keep the --keep workspaces that exist (snakemake builds only what is missing; "
        "each job's log keeps the resources of the run that made it)",
    )
    ap.add_argument("--hours", type=float, default=1000.0, help="training hours to extrapolate to")
    ap.add_argument(
        "--no-run",
        action="store_true",
        help="only read the --keep workspaces that exist (no snakemake): the tables again",
    )
    args = ap.parse_args()
    if len(args.minutes) < 2:
        ap.error("give two or more --minutes")
    if (args.reuse or args.no_run) and not args.keep:
        ap.error("--reuse and --no-run need --keep")
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_data_scale."))
    sizes, stats = [], []
    try:
        for minutes in sorted(args.minutes):
            ws = base / f"minutes{minutes:g}"
            if args.no_run:
                wall = float("nan")
            else:
                if ws.exists() and not args.reuse:
                    shutil.rmtree(ws)
                wall = run_size(ws, minutes, args.cores, args.timeout)
            hours = training_hours(ws)
            sizes.append((minutes, hours, wall))
            stats.append(stage_resources(ws))
            print(
                f"{minutes:g} min: {hours:.2f} h of training audio, {wall:.0f} s wall", flush=True
            )
        declared, holds = declared_table(base / f"minutes{max(args.minutes):g}")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print()
    print(table(sizes, stats))
    total = [sum(r["cpu_s"] for r in s.values()) for s in stats]
    print(
        "\ntraining audio: "
        + ", ".join(f"{m:g} min = {h:.2f} h" for m, h, _ in sizes)
        + "; all jobs' CPU s: "
        + "/".join(f"{t:.0f}" for t in total)
        + "; k = d log y / d log hours between the two largest sizes (CPU 1: linear, "
        "RSS 0: bounded)"
    )
    print(f"\ncarried linearly to {args.hours:g} h of training audio:\n")
    print(extrapolation(sizes, stats, args.hours))
    print(f"\ndeclared resources at {max(args.minutes):g} min (largest job of each rule):\n")
    print(declared)
    print("\nevery job within its declared mem_mb and runtime:", "yes" if holds else "NO")


if __name__ == "__main__":
    main()
