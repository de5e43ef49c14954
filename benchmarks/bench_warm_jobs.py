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
import shutil
import sys
import tempfile
from pathlib import Path

from _harness import copy_upstream, run_snakemake

from paravg.config import REPO_CONFIG
from paravg.layout import Layout
from paravg.progress import load_config

EXECUTORS = ("local", "paravg-warm")


def snakemake(ws: Path, configfiles: list[Path], *args: str):
    """The Snakefile in ``ws`` with the repository's config and ``configfiles``; scripts
    newer than the copied outputs must not rebuild the upstream stages."""
    args = ("--rerun-triggers", "mtime", "input", *args)
    return run_snakemake(ws, list(args), configfiles=[REPO_CONFIG, *configfiles], check=False)


def training_seconds(layout: Layout, exp: str) -> list[float]:
    """Seconds of each train job's training part (its statistics)."""
    out = []
    for stats_path in layout.existing("job_stats", exp).values():
        wall = json.loads(Path(stats_path).read_text())["wall"]
        out.append(wall["finished_at"] - wall["started_at"])
    return out


def run(args, executor: str, cfg: dict) -> dict:
    ws = Path(tempfile.mkdtemp(prefix=f"warm-{executor}-", dir=args.scratch))
    copy_upstream(args.workspace, ws, cfg["results"])
    layout = Layout(str(ws / cfg["results"]))
    target = Layout(cfg["results"]).final_model(args.experiment)
    dry = snakemake(ws, args.configfile, "-n", "--cores", str(args.cores), target)
    upstream_jobs = [
        r for r in ("egs", "prepare_data", "compute_features") if f"rule {r}:" in dry.output
    ]
    if dry.returncode != 0 or upstream_jobs:
        sys.exit(f"{ws}: the upstream stages would rerun ({upstream_jobs}):\n{dry.output[-3000:]}")
    proc = snakemake(
        ws, args.configfile, "--cores", str(args.cores), "--executor", executor, target
    )
    wall, cpu = proc.wall, proc.cpu
    if proc.returncode != 0:
        sys.exit(f"{executor}: snakemake failed:\n{proc.output[-6000:]}")
    training = training_seconds(layout, args.experiment)
    result = {
        "executor": executor,
        "wall": wall,
        "cpu": cpu,
        "jobs": len(re.findall(r"^Finished jobid", proc.output, re.M)),
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
    cfg = load_config([REPO_CONFIG, *args.configfile])
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
