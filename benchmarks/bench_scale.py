"""The DAG at Kaldi scale: a job's start-up against the run's length, and the main DAG.

A workspace with the tiny config's egs (archives copied up to ``--archives``) and a
2,500-iteration × 12-job schedule is given the files of finished iterations as the jobs
write them (job JSON with their plan record, synced models, diagnostics; model contents
are placeholders: nothing trains). Then, in one run:

1. **a job's start-up** — the command the SLURM executor runs on the node for one
   training job (``--target-jobs train_job:...  --allowed-rules train_job --force
   --nolock ...``, here as a dry run so nothing trains): its wall and CPU time at
   iteration 5 and at iteration 2,400 (target: ratio ≤ 1.5);
2. **the main DAG** — ``snakemake`` on a fresh run and on a resume at iteration 2,000,
   until the first job is started (target: ≤ 15 s on an idle 2-core machine; CPU
   seconds are printed beside the wall time, which a loaded machine inflates).

    .venv/bin/python benchmarks/bench_scale.py [--iterations 2500] [--jobs 12]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from paravg.config import REPO_CONFIG  # noqa: E402
from paravg.egs.archive import archive_files  # noqa: E402
from paravg.layout import Layout  # noqa: E402
from paravg.plan import ExperimentPlan, experiment_plans  # noqa: E402
from paravg.progress import load_config  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TINY = REPO / "tests" / "pipeline" / "tiny.yaml"
TICK = os.sysconf("SC_CLK_TCK")


def base_cmd(ws: Path, overlay: Path) -> list[str]:
    return [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(ws),
        "--configfile",
        str(TINY),
        str(overlay),
    ]


def build_upstream(d: Path) -> None:
    subprocess.run(
        [*base_cmd(d, TINY)[:-1], "--cores", "2", "egs_all"], check=True, stdout=subprocess.DEVNULL
    )


def fabricate(upstream: Path, ws: Path, overlay: Path, archives: int, done: int) -> ExperimentPlan:
    """Copy ``upstream``, widen its egs to ``archives`` archives, write finished
    iterations 1..``done`` as the jobs, sync nodes and diagnostics would; return the plan
    (every path and number comes from it)."""
    shutil.copytree(upstream, ws, symlinks=True)
    cfg = load_config([REPO_CONFIG, TINY, overlay])
    cwd = os.getcwd()
    os.chdir(ws)  # the plan's paths are relative to the workspace, as Snakemake's
    try:
        L = Layout(cfg["results"])
        st = os.stat(L.egs_info())
        info = json.loads(Path(L.egs_info()).read_text())
        a0, info["num_archives"] = info["num_archives"], archives
        Path(L.egs_info()).write_text(json.dumps(info))
        os.utime(L.egs_info(), ns=(st.st_atime_ns, st.st_mtime_ns))  # egs stay up to date
        for a in range(a0):  # archive b is a copy of archive b mod a0
            files = archive_files(L.egs_prefix(a), with_ivectors=True).values()
            for b in range(a0 + a, archives, a0):
                copies = archive_files(L.egs_prefix(b), with_ivectors=True).values()
                for f, copy in zip(files, copies, strict=True):
                    if os.path.exists(f):
                        shutil.copy2(f, copy)
        plan = experiment_plans(cfg, info)["default"]
        e = "default"
        if done == 0:
            return plan
        put(L.init_model(e), "placeholder")
        put(L.init_stats(e), json.dumps({"plan": {"fingerprint": plan.fingerprint(0)}}))
        for t in range(1, done + 1):
            put(plan.synced_model(t), "placeholder")
            put(plan.node_summary(t), "{}")
            for j in range(plan.num_jobs(t - 1)):
                rec = {
                    "fingerprint": plan.fingerprint(t),
                    "params": plan.job_params(t - 1, j),
                    "sync": plan.sync_fingerprint_part(),
                }
                put(L.job_stats(e, t, j), json.dumps({"plan": rec}))
                if t == done:  # the temporary job models of the newest iteration
                    put(L.job_model(e, t, j), "placeholder")
        for t in range(done + 1):
            put(L.diag(e, t), "{}")
        return plan
    finally:
        os.chdir(cwd)


def put(path: str, text: str) -> None:
    """Write ``text`` to the layout file ``path``, making its directory."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Path(path).write_text(text)


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU seconds) of a command run to its end."""
    t0 = time.perf_counter()
    before = os.times()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return time.perf_counter() - t0, cpu


def until_first_job(cmd: list[str]) -> tuple[float, float, str]:
    """(wall, CPU seconds, rule) until snakemake starts its first job; then kill it."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        for line in p.stdout:
            s = line.strip()
            if s.startswith(("rule ", "localrule ", "checkpoint ")) and s.endswith(":"):
                wall = time.perf_counter() - t0
                fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
                return wall, (int(fields[11]) + int(fields[12])) / TICK, s.split()[-1][:-1]
        raise RuntimeError("snakemake ended before starting a job")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=2500)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--archives", type=int, default=100)
    ap.add_argument("--early", type=int, default=5, help="iteration of the early job")
    ap.add_argument("--late", type=int, default=2400, help="iteration of the late job")
    ap.add_argument("--resume", type=int, default=2000, help="resume point of part 2")
    args = ap.parse_args()
    fpe = 8
    epochs = args.iterations * 2 * args.jobs / (2 * args.archives * fpe)
    with tempfile.TemporaryDirectory(prefix="bench_scale.") as tmp_name:
        tmp = Path(tmp_name)
        overlay = tmp / "overlay.yaml"
        overlay.write_text(
            yaml.safe_dump(
                {
                    "trainer": {
                        "num_epochs": epochs,
                        "num_jobs_initial": args.jobs,
                        "num_jobs_final": args.jobs,
                    }
                }
            )
        )
        upstream = tmp / "upstream"
        upstream.mkdir()
        print("building the tiny egs ...", flush=True)
        build_upstream(upstream)
        rows = []
        for done in (args.early, args.late):
            ws = tmp / f"ws{done}"
            plan = fabricate(upstream, ws, overlay, args.archives, done)
            job = f"train_job:exp=default,t={done + 1},j=3"
            cmd = [
                *base_cmd(ws, overlay),
                "--target-jobs",
                job,
                "--allowed-rules",
                "train_job",
                "--force",
                "--nolock",
                "--ignore-incomplete",
                "--notemp",
                "--cores",
                "1",
                "-n",
            ]
            timed(cmd)  # warm the file cache
            wall, cpu = min(timed(cmd) for _ in range(3))
            rows.append((f"job start-up at iteration {done}", wall, cpu))
            shutil.rmtree(ws)
        n, jobs = plan.num_iters, plan.num_jobs(0)  # the plan's (the epochs above aim at them)
        print(f"\n{n} iterations x {jobs} jobs, {args.archives} archives\n")
        print(f"{'what':<44} {'wall s':>8} {'CPU s':>8} {'ratio':>7}")
        for name, wall, cpu in rows:
            print(f"{name:<44} {wall:8.2f} {cpu:8.2f} {wall / rows[0][1]:6.2f}x")
        print("target: late / early <= 1.5\n")
        for label, done in (("fresh run", 0), (f"resume at iteration {args.resume}", args.resume)):
            ws = tmp / f"main{done}"
            fabricate(upstream, ws, overlay, args.archives, done)
            wall, cpu, rule = until_first_job([*base_cmd(ws, overlay), "--cores", "2"])
            print(f"main DAG, {label:<33} {wall:8.2f} {cpu:8.2f}   first job: {rule}")
            shutil.rmtree(ws)
        print("target: first submission <= 15 s")


if __name__ == "__main__":
    main()
