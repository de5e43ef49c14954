"""The warm worker of paravg-slurm's warm pool (executor/snakemake_executor_plugin_paravg_warm/
worker.py), run here as a plain process (no SLURM): each request file becomes one fork that
runs the script in the job's directory and environment, and its result says how it ended:
its exit status, a signal, or the worker's time limit. A worker killed with SIGKILL takes
its jobs with it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = "snakemake_executor_plugin_paravg_warm.worker"


def request(directory: Path, job_id: str, script: Path, runtime_s: float = 60, **extra) -> None:
    body = {
        "script": str(script),
        "cwd": str(script.parent),
        "env": {"OMP_NUM_THREADS": "1", "PARAVG_TEST_VALUE": job_id},
        "gpus": 0,
        "runtime_s": runtime_s,
        "benchmark": False,
        "label": job_id,
        **extra,
    }
    tmp = directory / "jobs" / f".{job_id}.tmp"
    tmp.write_text(json.dumps(body))
    os.replace(tmp, directory / "jobs" / f"{job_id}.json")


def wait_for(predicate, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def result(directory: Path, job_id: str) -> dict:
    path = directory / "done" / f"{job_id}.json"
    wait_for(path.exists)
    return json.loads(path.read_text())


@pytest.fixture
def worker(tmp_path):
    directory = tmp_path / "w"
    proc = subprocess.Popen(
        [sys.executable, "-m", WORKER, str(directory), "--orphan-seconds", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    wait_for(lambda: (directory / "ready.json").exists() or proc.poll() is not None)
    assert proc.poll() is None, proc.communicate()[0]
    yield directory, proc
    (directory / "stop").touch()
    try:
        proc.wait(timeout=30)
    finally:
        proc.kill()


def test_jobs_run_in_their_directory_and_report_how_they_ended(worker, tmp_path):
    directory, _ = worker
    ok = tmp_path / "ok.py"
    ok.write_text(
        "import os\n"
        "open('out.txt', 'w').write(os.environ['PARAVG_TEST_VALUE'] + ' ' + "
        "os.environ['OMP_NUM_THREADS'] + ' ' + repr(os.environ['CUDA_VISIBLE_DEVICES']))\n"
    )
    (tmp_path / "fail.py").write_text("raise SystemExit(3)\n")
    (tmp_path / "hang.py").write_text("import time\ntime.sleep(600)\n")
    (tmp_path / "abort.py").write_text("import os\nos.abort()\n")
    request(directory, "ok", ok, benchmark=True)
    request(directory, "fail", tmp_path / "fail.py")
    request(directory, "abort", tmp_path / "abort.py")
    request(directory, "hang", tmp_path / "hang.py", runtime_s=1)

    done = result(directory, "ok")
    assert done["exitcode"] == 0 and not done["timed_out"]
    assert done["benchmark"]["running_time"] > 0
    assert (tmp_path / "out.txt").read_text() == "ok 1 ''"  # no GPU asked: none visible
    assert result(directory, "fail")["exitcode"] == 3
    assert result(directory, "abort")["exitcode"] == -signal.SIGABRT
    hang = result(directory, "hang")
    assert hang["timed_out"] and hang["exitcode"] == -signal.SIGTERM
    assert not list((directory / "jobs").glob("*.json"))  # every request taken


def test_a_killed_worker_takes_its_jobs_with_it(worker, tmp_path):
    directory, proc = worker
    script = tmp_path / "hang.py"
    script.write_text(
        "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(600)\n"
    )
    request(directory, "hang", script)
    wait_for((tmp_path / "pid").exists)
    wait_for(lambda: (tmp_path / "pid").read_text().strip() != "")
    child = int((tmp_path / "pid").read_text())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)

    def child_gone() -> bool:
        try:
            return Path(f"/proc/{child}/status").read_text().count("State:\tZ") > 0
        except FileNotFoundError:
            return True

    wait_for(child_gone, timeout_s=10)
    assert not (directory / "done" / "hang.json").exists()
