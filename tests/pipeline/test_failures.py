"""Failures cost only the failed job: SIGKILL mid-job, truncated and diverged job models.

The tiny pipeline runs from the shared egs. One training job of a middle iteration is
made slow (the ``simulate.straggler`` aid: it sleeps after training, before writing) and
killed with SIGKILL while it sleeps; the same command is then run again. Only the killed
job and what depends on it may run, and ``final.pt`` must be bit-identical to an
uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import (
    REPO,
    SNAKEMAKE,
    TINY,
    check_ok,
    run_snakemake,
    tiny_plan,
    tiny_schedule,
)

pytestmark = pytest.mark.pipeline


@pytest.fixture(scope="module")
def victim(upstream) -> int:
    """The job directory (t + 1) of a middle iteration t that runs two jobs."""
    sched = tiny_schedule(upstream)
    two_jobs = [t for t in range(sched.num_iters) if sched.num_jobs(t) >= 2]
    return two_jobs[len(two_jobs) // 2] + 1


@pytest.fixture(scope="module")
def straggler(victim) -> dict:
    """Job 1 of the victim's iteration sleeps after training (time to SIGKILL it)."""
    return {"simulate": {"straggler": {"job": 1, "factor": 40.0, "iteration": victim - 1}}}


def find_job_process(log_file: Path) -> int | None:
    """PID of the process that has ``log_file`` open (the job writing it)."""
    target = str(log_file.resolve())
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    return int(pid)
        except OSError:
            continue
    return None


def model_mtimes(exp: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in exp.glob("*.pt")}


@pytest.fixture(scope="module")
def uninterrupted(clone_upstream, straggler) -> Path:
    ws = clone_upstream("uninterrupted")
    check_ok(run_snakemake(ws, "--cores", "2", overlay=straggler), "uninterrupted run")
    return ws


def test_sigkilled_job_reruns_alone_and_result_is_identical(
    clone_upstream, uninterrupted, straggler, victim
):
    ws = clone_upstream("killed")
    (ws / "overlay.yaml").write_text(json.dumps(straggler))
    cmd = [
        SNAKEMAKE,
        "-s",
        str(REPO / "Snakefile"),
        "--directory",
        str(ws),
        "--cores",
        "2",
        "--configfile",
        str(TINY),
        str(ws / "overlay.yaml"),
    ]
    proc = subprocess.Popen(
        cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    exp = ws / "results" / "exp" / "default"
    victim_dir = victim  # job 1 of this iteration writes <victim>/job1.pt
    log_file = ws / "logs" / "train_job" / "default" / str(victim_dir) / "job1.log"
    killed = False
    deadline = time.time() + 900
    while time.time() < deadline and proc.poll() is None:
        if log_file.exists() and "trained" in log_file.read_text():  # sleeping now
            pid = find_job_process(log_file)
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed = True
                break
        time.sleep(0.2)
    out = proc.communicate(timeout=900)[0]
    assert killed, "did not catch the training job:\n" + out[-3000:]
    assert proc.returncode != 0, "snakemake should report the killed job"
    assert not (exp / str(victim_dir) / "job1.pt").exists(), "no half-written model"
    before = model_mtimes(exp)

    plan = run_snakemake(ws, "-n", "--cores", "2", overlay=straggler)
    check_ok(plan, "dry-run after the kill")
    planned = [f for line in re.findall(r"output: (.*)", plan.stdout) for f in line.split(", ")]
    trains = [o for o in planned if re.search(r"/job\d+\.pt", o)]
    assert f"results/exp/default/{victim_dir}/job1.pt" in trains
    assert all(int(re.search(r"/(\d+)/job", o).group(1)) >= victim_dir for o in trains), trains

    check_ok(run_snakemake(ws, "--cores", "2", overlay=straggler), "rerun after the kill")
    after = model_mtimes(exp)
    for path, mtime in before.items():
        assert after[path] == mtime, f"{path} was rewritten by the rerun"
    ref = uninterrupted / "results" / "exp" / "default" / "final.pt"
    assert (exp / "final.pt").read_bytes() == ref.read_bytes()


def test_a_damaged_synced_model_is_rebuilt_by_the_commands_its_error_gives(
    uninterrupted, straggler, tmp_path
):
    """A byte of <m>.pt changes after the run (the job models are gone, as with
    run.keep_job_models: false): its reader stops naming the rule and two commands; they
    rebuild exactly that file (iteration m − 1 retrains from <m−1>.pt), bit for bit, and
    the run then completes with the same final.pt."""
    ws = tmp_path / "ws"
    shutil.copytree(uninterrupted, ws, symlinks=True, copy_function=shutil.copy2)
    exp = ws / "results" / "exp" / "default"
    overlay = {**straggler, "run": {"keep_job_models": False}}
    plan = tiny_plan(ws, straggler)
    m = next(t for t in plan.combine_indices() if t >= 2 and plan.num_jobs(t - 1) >= 2)
    model = exp / f"{m}.pt"
    original, final = model.read_bytes(), (exp / "final.pt").read_bytes()
    for job_model in exp.glob("*/job*.pt"):  # what a run with temporary job models keeps
        job_model.unlink()
    data = bytearray(original)
    data[len(data) // 2] ^= 0x01  # one bit, deep inside the parameters
    model.write_bytes(bytes(data))
    for out in ("combined.pt", "combine.json"):  # its reader (combination) runs again
        (exp / out).unlink()

    proc = run_snakemake(ws, "--cores", "2", overlay=overlay)
    assert proc.returncode != 0
    log = (ws / "logs" / "combine" / "default.log").read_text()
    assert f"results/exp/default/{m}.pt: its bytes differ from what rule average" in log, log
    lines = [line.strip() for line in log.splitlines()]
    assert f"rm results/exp/default/{m}.pt" in lines
    assert any(
        line.startswith("snakemake ") and line.endswith(f" results/exp/default/{m}.pt")
        for line in lines
    ), log

    model.unlink()  # the two commands, with this test's options
    dry = run_snakemake(ws, "-n", "--cores", "2", f"results/exp/default/{m}.pt", overlay=overlay)
    check_ok(dry, "dry-run of the rebuild")
    planned = sorted(set(re.findall(r"^(?:local)?rule (\w+):", dry.stdout, re.M)))
    assert planned == ["average", "train_job"], planned
    outputs = " ".join(re.findall(r"^\s*output: (.*)$", dry.stdout, re.M))
    assert set(re.findall(r"results/exp/default/(\d+)/job\d+\.pt", outputs)) == {str(m)}
    check_ok(
        run_snakemake(ws, "--cores", "2", f"results/exp/default/{m}.pt", overlay=overlay),
        "the rebuild",
    )
    assert model.read_bytes() == original, "the rebuilt model differs"
    check_ok(run_snakemake(ws, "--cores", "2", overlay=overlay), "the run after the rebuild")
    assert (exp / "final.pt").read_bytes() == final


def two_job_dirs(ws: Path) -> list[int]:
    """Job directories (t + 1) of the iterations t that ran two jobs."""
    sched = tiny_schedule(ws)
    return [t + 1 for t in range(sched.num_iters) if sched.num_jobs(t) >= 2]


def test_truncated_job_model_is_detected_not_averaged(uninterrupted, straggler):
    exp = uninterrupted / "results" / "exp" / "default"
    t = two_job_dirs(uninterrupted)[0]
    job = exp / str(t) / "job0.pt"
    job.write_bytes(job.read_bytes()[:200])  # a file cut short by a crash of an older run
    (exp / f"{t}.pt").unlink()
    check_ok(run_snakemake(uninterrupted, "--cores", "2", overlay=straggler), "rerun")
    summary = json.loads((exp / "sync" / f"{t}.json").read_text())
    assert 0 not in summary["accepted"]
    assert any("job 0" in p and "job0.pt" in p for p in summary["problems"])
    log = (uninterrupted / "logs" / "average" / "default" / f"{t}.log").read_text()
    assert "excluding job 0" in log


def test_all_jobs_diverged_stops_with_a_message(uninterrupted, straggler):
    exp = uninterrupted / "results" / "exp" / "default"
    t = two_job_dirs(uninterrupted)[-1]
    for stats in (exp / str(t)).glob("job*.json"):
        data = json.loads(stats.read_text())
        data["objf"] = float("nan")
        stats.write_text(json.dumps(data))
    (exp / f"{t}.pt").unlink()
    proc = run_snakemake(uninterrupted, "--cores", "2", overlay=straggler)
    assert proc.returncode != 0
    log = (uninterrupted / "logs" / "average" / "default" / f"{t}.log").read_text()
    assert re.search(rf"iteration {t - 1}: no acceptable job among \d+: job 0", log), log[-2000:]
