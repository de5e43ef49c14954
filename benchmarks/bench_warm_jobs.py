"""A job's fixed cost: Snakemake's local executor (a fresh Python per job) against
paravg-warm (jobs forked from a server that has imported torch), in one run.

For each executor, the training stage of one experiment is run from the same finished
upstream stages (data, features, i-vectors, egs: copied from a workspace, so nothing
upstream reruns) to ``final.pt``. Printed side by side:

* wall time of the stage;
* per train job: CPU seconds (``benchmark:`` files: psutil on the job's process, the same
  measure for both), the training part's own seconds (the job's statistics:
  ``wall.finished_at − wall.started_at``, one thread), and their difference, the job's
  fixed cost (interpreter, imports, reading the start models, writing);
* whether ``final.pt`` is bit-identical between the two.

    .venv/bin/python benchmarks/bench_warm_jobs.py --workspace . --cores 2
    .venv/bin/python benchmarks/bench_warm_jobs.py --workspace /tmp/ws \\
        --configfile tests/pipeline/tiny.yaml

``--workspace`` is a run directory whose upstream stages are finished (its ``results`` as
the config says); the runs happen in copies under ``--scratch``.
"""

from __future__ import annotations

import argparse
import csv
import json
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

from paravg.config import REPO_CONFIG, deep_merge, validate_config  # noqa: E402
from paravg.layout import Layout  # noqa: E402

EXECUTORS = ("local", "paravg-warm")
UPSTREAM = ("demo", "data", "feats", "ivector", "egs", "graph")


def load_config(configfiles: list[Path]) -> dict:
    cfg = yaml.safe_load(REPO_CONFIG.read_text())
    for f in configfiles:
        cfg = deep_merge(cfg, yaml.safe_load(f.read_text()) or {})
    return validate_config(cfg)


def copy_upstream(workspace: Path, dest: Path, results: str) -> None:
    """The finished upstream stages and Snakemake's metadata, mtimes kept."""
    for name in UPSTREAM:
        src = workspace / results / name
        if src.exists():
            shutil.copytree(src, dest / results / name, copy_function=shutil.copy2)
    if (workspace / ".snakemake" / "metadata").exists():
        shutil.copytree(
            workspace / ".snakemake" / "metadata",
            dest / ".snakemake" / "metadata",
            copy_function=shutil.copy2,
        )


def snakemake(ws: Path, configfiles: list[Path], *args: str) -> subprocess.CompletedProcess:
    cmd = [str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile")]
    cmd += ["--directory", str(ws), "--configfile", str(REPO_CONFIG), *map(str, configfiles)]
    # scripts newer than the copied outputs must not rebuild the upstream stages
    cmd += ["--rerun-triggers", "mtime", "input", *args]
    return subprocess.run(cmd, cwd=ws, capture_output=True, text=True)


def train_job_costs(layout: Layout, exp: str) -> list[tuple[float, float]]:
    """(CPU seconds of the job's process, seconds of its training part) per train job."""
    costs = []
    for (t, j), stats_path in layout.existing("job_stats", exp).items():
        bench = Path(layout.benchmark("train_job", f"{exp}/{t}/job{j}"))
        with open(bench) as f:
            row = next(csv.DictReader(f, delimiter="\t"))
        wall = json.loads(Path(stats_path).read_text())["wall"]
        costs.append((float(row["cpu_time"]), wall["finished_at"] - wall["started_at"]))
    return costs


def run(args, executor: str, cfg: dict) -> dict:
    ws = Path(tempfile.mkdtemp(prefix=f"warm-{executor}-", dir=args.scratch))
    copy_upstream(args.workspace, ws, cfg["results"])
    layout = Layout(str(ws / cfg["results"]))
    target = Layout(cfg["results"]).final_model(args.experiment)
    dry = snakemake(ws, args.configfile, "-n", "--cores", str(args.cores), target)
    upstream_jobs = [
        r for r in ("egs", "prepare_data", "compute_features") if f"rule {r}:" in dry.stdout
    ]
    if dry.returncode != 0 or upstream_jobs:
        sys.exit(f"{ws}: the upstream stages would rerun ({upstream_jobs}):\n{dry.stdout[-3000:]}")
    started = time.perf_counter()
    proc = snakemake(
        ws, args.configfile, "--cores", str(args.cores), "--executor", executor, target
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{executor}: snakemake failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    costs = train_job_costs(layout, args.experiment)
    result = {
        "executor": executor,
        "wall": wall,
        "jobs": len(costs),
        "cpu": statistics.mean(c for c, _ in costs),
        "train": statistics.mean(t for _, t in costs),
        "final": Path(layout.final_model(args.experiment)).read_bytes(),
    }
    if not args.keep:
        shutil.rmtree(ws)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--workspace", type=Path, default=Path("."), help="run dir with finished upstream stages"
    )
    ap.add_argument(
        "--configfile",
        type=Path,
        nargs="*",
        default=[],
        help="config files over config/config.yaml",
    )
    ap.add_argument("--experiment", default="default")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--keep", action="store_true", help="keep the run copies")
    args = ap.parse_args()
    args.workspace = args.workspace.resolve()
    args.configfile = [f.resolve() for f in args.configfile]
    cfg = load_config(args.configfile)
    results = [run(args, executor, cfg) for executor in EXECUTORS]
    base = results[0]
    stage = f"training stage of {args.experiment!r} to final.pt"
    print(f"{stage}, {args.cores} cores, {base['jobs']} train jobs")
    print("| executor | wall s | ratio | CPU s / train job | training part s "
          "| fixed cost s / job | ratio |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    base_fixed = base["cpu"] - base["train"]
    for r in results:
        fixed = r["cpu"] - r["train"]
        print(
            f"| {r['executor']} | {r['wall']:.1f} | {r['wall'] / base['wall']:.2f} "
            f"| {r['cpu']:.2f} | {r['train']:.2f} | {fixed:.2f} | {fixed / base_fixed:.2f} |"
        )
    same = all(r["final"] == base["final"] for r in results)
    print(f"final.pt bit-identical across executors: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
