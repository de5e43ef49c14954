"""The main snakemake's own CPU with Snakemake's re-evaluation timers and with one.

``paravg/scheduler_wakeups.py``: Snakemake's scheduler starts one more chain of 1-second
timers for each job that finishes while others wait for cores, and each timer wakes a pass
over every waiting job. This benchmark runs the same DAG twice, with Snakemake's own timers
(``coalesce_scheduler_wakeups`` made a no-op before the Snakefile calls it) and with
paravg's single pending timer (what every run does), and prints, side by side, the main
snakemake's own CPU after its first job (``/proc/<pid>/stat``: its threads, not its
children), per job, its wall time and the most threads it held (read every 50 ms).

The DAG is the tiny config's egs (widened to N archives) and ``--experiments``
experiments of ``--iterations`` iterations of ``--jobs`` (N) learners averaging, each
iteration's sync node and diagnostics too, training simulated by a sleep of
``--train-seconds``, run by the local profile's executor (paravg-warm) on ``--cores``
cores: fewer cores than learners, as a sync comparison on a workstation
(``config/experiments/sync_paper_lstm.yaml``: 8 experiments on 2 cores), so jobs wait for
cores the whole run.

    .venv/bin/python benchmarks/bench_scheduler_wakeups.py   # 4 experiments, N = 4, 16 iterations

About 2 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from _harness import TINY, run_measured, snakemake_cmd, upstream_workspace, widen_egs

from paravg.config import REPO_CONFIG
from paravg.layout import Layout
from paravg.plan import experiment_plans
from paravg.progress import load_config

#: snakemake's command line run by a Python that first makes paravg's patch a no-op
WITH_SNAKEMAKES_TIMERS = (
    "import sys, paravg.scheduler_wakeups as w; w.coalesce_scheduler_wakeups = lambda: False; "
    "from snakemake.cli import main; sys.argv[0] = 'snakemake'; main()"
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiments", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=4, help="learners N")
    ap.add_argument("--iterations", type=int, default=16)
    ap.add_argument("--train-seconds", type=float, default=0.3)
    ap.add_argument("--cores", type=int, default=2)
    args = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench_wakeups.") as tmp_name:
        tmp = Path(tmp_name)
        upstream = upstream_workspace(tmp)
        results = load_config([REPO_CONFIG, TINY])["results"]
        widen_egs(Layout.in_workdir(upstream, results), args.jobs)
        info = json.loads(Path(Layout.in_workdir(upstream, results).egs_info()).read_text())
        # num_iters = int(E · A · F / N) with A = N archives of F = 8 frames per eg
        overlay = {
            "trainer": {
                "num_epochs": (args.iterations + 0.5) / 8,
                "num_jobs_initial": args.jobs,
                "num_jobs_final": args.jobs,
            },
            "simulate": {"train_seconds": args.train_seconds},
            "experiments": {f"e{k}": {} for k in range(args.experiments)},
        }
        path = tmp / "overlay.yaml"
        path.write_text(yaml.safe_dump(overlay))
        targets = []
        for name, plan in experiment_plans(load_config([REPO_CONFIG, TINY, path]), info).items():
            if plan.num_iters < args.iterations:
                sys.exit(f"the plan has {plan.num_iters} iterations, not {args.iterations}")
            targets += plan.job_outputs(args.iterations)
            for t in range(1, args.iterations + 1):
                targets += [plan.synced_model(t), plan.layout.diag(name, t)]
        for timers in ("snakemake's", "paravg's one"):
            ws = tmp / timers.split("'")[0]
            shutil.copytree(upstream, ws, symlinks=True)
            cmd = [
                *snakemake_cmd(ws, TINY, path),
                "--executor", "paravg-warm",
                "--cores", str(args.cores),
                *targets,
            ]  # fmt: skip
            if timers == "snakemake's":
                cmd = [sys.executable, "-c", WITH_SNAKEMAKES_TIMERS, *cmd[1:]]
            print(f"{timers} timers ...", flush=True)
            m = run_measured(cmd, ws, 3600, "bench_scheduler_wakeups")
            m["after"] = m["end_cpu"] - m["start_cpu"]
            rows[timers] = m
            shutil.rmtree(ws)
    base = rows["snakemake's"]
    print(
        f"\nthe main snakemake, {args.experiments} experiments of {args.iterations} iterations "
        f"of {args.jobs} averaging learners "
        f"(+ sync nodes, diagnostics), jobs simulated ({args.train_seconds:g} s), paravg-warm, "
        f"--cores {args.cores}\n"
    )
    head = (
        f"{'re-evaluation timers':>21} {'jobs':>6} {'wall s':>7} {'CPU s after 1st job':>20} "
        f"{'ms/job':>7} {'CPU vs snakemake':>17} {'most threads':>13}"
    )
    print(head)
    print("-" * len(head))
    for timers, m in rows.items():
        print(
            f"{timers:>21} {m['jobs']:6d} {m['wall']:7.1f} {m['after']:20.2f} "
            f"{1000 * m['after'] / m['jobs']:7.1f} {m['after'] / base['after']:16.2f}x "
            f"{m['threads']:13d}"
        )
    print(
        "\nCPU s after 1st job: the main process's own CPU from its first job to its end "
        "(the scheduler, the DAG, the executor's submissions); the jobs run in forks of "
        "paravg-warm's server, outside it."
    )


if __name__ == "__main__":
    main()
