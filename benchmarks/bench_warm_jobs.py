"""A job's fixed cost: Snakemake's local executor (a fresh Python per job) against
paravg-warm (jobs forked from a server that has imported torch), in one run.

For each executor, the training stage of one experiment is run from the same finished
upstream stages (data, features, i-vectors, egs: copied from a workspace, so nothing
upstream reruns) to ``final.pt``. Printed side by side:

* wall time of the stage;
* its CPU time, every process included (snakemake, its jobs; the warm server and its
  forks, which the executor stops and waits for at the end): ``getrusage`` of the
  finished snakemake, per DAG job;
* the train jobs' training parts (their statistics: ``wall.finished_at − wall.started_at``,
  one thread), and what is left per job: an upper bound of a job's fixed cost
  (interpreter, imports, reading and writing models, and the small jobs' own work);
* whether ``final.pt`` is bit-identical between the two.

    .venv/bin/python benchmarks/bench_warm_jobs.py --workspace . --cores 2
    .venv/bin/python benchmarks/bench_warm_jobs.py --workspace /tmp/ws \\
        --configfile tests/pipeline/tiny.yaml

``--workspace`` is a run directory whose upstream stages are finished (its ``results`` as
the config says); the runs happen in copies under ``--scratch``.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import shutil
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


def training_seconds(layout: Layout, exp: str) -> list[float]:
    """Seconds of each train job's training part (its statistics)."""
    out = []
    for stats_path in layout.existing("job_stats", exp).values():
        wall = json.loads(Path(stats_path).read_text())["wall"]
        out.append(wall["finished_at"] - wall["started_at"])
    return out


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


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
    cpu, started = children_cpu(), time.perf_counter()
    proc = snakemake(
        ws, args.configfile, "--cores", str(args.cores), "--executor", executor, target
    )
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu
    if proc.returncode != 0:
        sys.exit(f"{executor}: snakemake failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    training = training_seconds(layout, args.experiment)
    result = {
        "executor": executor,
        "wall": wall,
        "cpu": cpu,
        "jobs": len(re.findall(r"^Finished jobid", proc.stdout + proc.stderr, re.M)),
        "train_jobs": len(training),
        "training": sum(training),
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
    print(
        f"{stage}, {args.cores} cores: {base['jobs']} jobs, {base['train_jobs']} of them train jobs"
    )
    print("| executor | wall s | ratio | CPU s | ratio | CPU s / job "
          "| training parts s / train job | the rest, CPU s / job |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        rest = (r["cpu"] - r["training"]) / r["jobs"]
        print(
            f"| {r['executor']} | {r['wall']:.1f} | {r['wall'] / base['wall']:.2f} "
            f"| {r['cpu']:.1f} | {r['cpu'] / base['cpu']:.2f} | {r['cpu'] / r['jobs']:.2f} "
            f"| {r['training'] / r['train_jobs']:.2f} | {rest:.2f} |"
        )
    same = all(r["final"] == base["final"] for r in results)
    print(f"final.pt bit-identical across executors: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
