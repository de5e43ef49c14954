"""paravg-warm (``--executor paravg-warm``): Python jobs forked from a warm server keep
every guarantee of a job in its own process; and jobs that read the synced model (large N)
compute the same bits as jobs that average the job models themselves.

One run trains the tiny default experiment from the shared egs to ``final.pt`` with the
warm executor and ``--retries 1``. One training job of a middle iteration is slow (the
``simulate.straggler`` aid, timing only): while it sleeps, its forked worker is killed
with SIGKILL (a dead worker). Snakemake must notice, rerun that job, and finish; and
``final.pt`` must be bit-identical to the shared workspace's, trained by Snakemake's own
local executor (a fresh interpreter per job).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from .conftest import FINAL, TRAINED_OVERLAY, catch_sleeping_job, snakemake_command

pytestmark = pytest.mark.pipeline


def test_a_killed_warm_worker_is_rerun_and_the_bits_are_those_of_fresh_processes(
    clone_upstream, trained, straggler, victim
):
    ws = clone_upstream("warm")
    overlay = {**TRAINED_OVERLAY, **straggler}
    log_file = ws / "logs" / "train_job" / "default" / str(victim) / "job1.log"
    cmd = [*snakemake_command(ws, overlay), "--cores", "2", "--executor", "paravg-warm"]
    proc = subprocess.Popen(
        [*cmd, "--retries", "1", FINAL],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    killed = catch_sleeping_job(proc, log_file)
    assert killed is not None, "the slow job was never caught sleeping"
    # the job runs in a fork of the warm server, not in a process snakemake started
    assert os.getppid() != killed and proc.pid != killed
    os.kill(killed, signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-6000:]
    assert f"warm worker (pid {killed}) killed by signal 9" in out
    assert "Trying to restart job" in out
    assert (ws / FINAL).read_bytes() == (trained / FINAL).read_bytes()


def test_jobs_that_read_the_synced_model_give_the_same_bits(clone_upstream, trained):
    """With run.synced_start_mb: 0 every job of an iteration ≥ 1 reads the node's <t>.pt
    (Kaldi's 2N model reads) instead of averaging the job models itself: the DAG puts the
    node on the critical path, and final.pt is bit for bit the shared workspace's."""
    ws = clone_upstream("synced-start")
    overlay = {**TRAINED_OVERLAY, "run": {"synced_start_mb": 0}}
    cmd = [*snakemake_command(ws, overlay), "--cores", "2", "--executor", "paravg-warm", FINAL]
    proc = subprocess.run(cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    stats = json.loads((ws / "results/exp/default/3/job0.json").read_text())
    assert stats["start"]["synced"].endswith("results/exp/default/2.pt")
    # the job checked the plan on the node's summary, which recorded its inputs' (the jobs
    # of index 2: one input instead of their N statistics)
    summary = json.loads((ws / "results/exp/default/sync/2.json").read_text())
    inputs = json.loads((ws / "results/exp/default/2/job0.json").read_text())
    assert summary["plan"]["fingerprint"] == inputs["plan"]["fingerprint"]
    assert (ws / FINAL).read_bytes() == (trained / FINAL).read_bytes()
