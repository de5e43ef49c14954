"""A job's last words: a user error is one message on screen, its traceback in the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

JOB = """
from paravg.errors import DataError
from paravg.logs import setup_logging

setup_logging({log!r})
def read_text_file():
    {raise_}
read_text_file()
"""


def run_job(tmp_path: Path, raise_: str) -> tuple[str, str]:
    log = tmp_path / "logs" / "job.log"
    script = tmp_path / "job.py"
    script.write_text(JOB.format(log=str(log), raise_=raise_))
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=repo, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    return proc.stderr, log.read_text()


def test_a_user_error_prints_its_message_alone_and_logs_its_traceback(tmp_path):
    """B8: every ParavgError raised in a job printed its message and a 10-15-line traceback."""
    stderr, log = run_job(tmp_path, "raise DataError('data/test/text:3: no transcript')")
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].endswith("CRITICAL paravg: DataError: data/test/text:3: no transcript")
    assert "Traceback" in log and "in read_text_file" in log
    assert "DataError: data/test/text:3: no transcript" in log


@pytest.mark.parametrize("error", ["KeyError('bug')", "ValueError('bug')"])
def test_a_bug_keeps_its_traceback_on_screen(tmp_path, error):
    stderr, log = run_job(tmp_path, f"raise {error}")
    assert "Traceback" in stderr and "in read_text_file" in stderr
    assert "Traceback" in log


RESOURCE_JOB = """
import multiprocessing
import sys

from paravg.logs import setup_logging


def job(log, mib):
    setup_logging(log)
    block = bytearray(mib * 2**20)
    block[:: 4096] = b"x" * len(block[:: 4096])  # touch every page
    sum(range(10_000_000))  # about 0.2 CPU s
    if mib == 0:
        raise SystemExit(3)


if __name__ == "__main__":
    log, mib, forked = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fork"
    if forked:  # as paravg-warm runs a job: a multiprocessing child that ends by os._exit
        p = multiprocessing.get_context("fork").Process(target=job, args=(log, mib))
        p.start()
        p.join()
    else:
        job(log, mib)
"""


@pytest.mark.parametrize("how", ["fresh", "fork"])
def test_every_job_logs_its_cpu_and_peak_memory_once(tmp_path, how):
    from paravg.logs import read_job_resources

    script = tmp_path / "job.py"
    script.write_text(RESOURCE_JOB)
    repo = Path(__file__).resolve().parents[2]
    found = {}
    for mib in (10, 300):
        log = tmp_path / f"{how}{mib}.log"
        proc = subprocess.run(
            [sys.executable, str(script), str(log), str(mib), how],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert "job resources" not in proc.stderr  # the log file's alone
        assert log.read_text().count("job resources: cpu_s=") == 1
        found[mib] = read_job_resources(log)
    assert found[10]["cpu_s"] > 0.1
    assert 280 < found[300]["max_rss_mb"] - found[10]["max_rss_mb"] < 330


def test_a_failed_job_logs_its_resources_too(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(RESOURCE_JOB)
    log = tmp_path / "failed.log"
    repo = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(script), str(log), "0", "fresh"], cwd=repo, timeout=120
    )
    assert proc.returncode == 3
    assert "job resources: cpu_s=" in log.read_text()
