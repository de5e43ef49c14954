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
