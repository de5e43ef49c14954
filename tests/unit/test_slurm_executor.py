"""executor/ (paravg-slurm): the end file each batch script leaves, and when it queries SLURM.

The shell text is run by real shells the way sbatch would (``--wrap`` passes through the
submitting shell inside double quotes, then runs under ``/bin/sh``); the status logic runs
against a stand-in for the SLURM plugin's ``sacct`` query.
"""

import asyncio
import subprocess
import types

import pytest
import snakemake_executor_plugin_paravg_slurm as plugin
import snakemake_executor_plugin_slurm as upstream


@pytest.mark.parametrize("status", [0, 3])
@pytest.mark.parametrize("escaped", [True, False])
def test_end_file_keeps_the_exit_status(tmp_path, status, escaped):
    end_dir = tmp_path / "ends dir"  # a space: the path is quoted
    end_dir.mkdir()
    script = plugin.with_end_file(f'echo "job" && (exit {status})', end_dir, escaped)
    env = {"SLURM_JOB_ID": "4242", "PATH": "/usr/bin:/bin"}
    if escaped:  # what the SLURM plugin does: --wrap="<command, its \" escaped>"
        wrap = script.replace('"', '\\"')
        proc = subprocess.run(f'sh -c "{wrap}"', shell=True, env=env, capture_output=True)
    else:  # --paravg-slurm-pass-command-as-script: the text is the script
        proc = subprocess.run(["sh", "-c", script], env=env, capture_output=True)
    assert proc.returncode == status
    assert proc.stdout == b"job\n"
    assert (end_dir / "4242.ended").read_text() == f"{status}\n"


def _executor(tmp_path, monkeypatch, finished_by_sacct):
    """A paravg-slurm Executor without a workflow; ``sacct`` reports ``finished_by_sacct``."""
    calls = []

    async def sacct(self, active_jobs):
        calls.append(sorted(j.external_jobid for j in active_jobs))
        for job in active_jobs:
            if job.external_jobid not in finished_by_sacct:
                yield job

    monkeypatch.setattr(upstream.Executor, "check_active_jobs", sacct)
    ex = plugin.Executor.__new__(plugin.Executor)
    ex.workflow = types.SimpleNamespace(
        executor_settings=plugin.ExecutorSettings(max_status_check_seconds=5, end_check_seconds=0.5)
    )
    ex.end_dir = tmp_path
    ex.next_status_query = 0.0
    ex._failed_nodes = set()
    ex.user_excluded_nodes = set()
    ex._next_seconds_between_status_checks = None
    return ex, calls


def _check(ex, jobs):
    async def run():
        return [j.external_jobid async for j in ex.check_active_jobs(jobs)]

    return asyncio.run(run())


def test_sacct_runs_when_an_end_file_appears_or_the_cap_passes(tmp_path, monkeypatch):
    finished = set()
    ex, calls = _executor(tmp_path, monkeypatch, finished)
    jobs = [types.SimpleNamespace(external_jobid=str(i)) for i in (11, 12)]

    assert _check(ex, jobs) == ["11", "12"]  # the first check queries
    assert calls == [["11", "12"]]
    assert ex.next_seconds_between_status_checks == 0.5
    assert _check(ex, jobs) == ["11", "12"]  # no end file, cap not reached: no query
    assert len(calls) == 1

    (tmp_path / "12.ended").write_text("0\n")  # job 12's script ended ...
    assert _check(ex, jobs) == ["11", "12"]  # ... but SLURM does not say so yet
    assert len(calls) == 2
    finished.add("12")
    assert _check(ex, jobs) == ["11"]  # queried again at once, 12 is reported
    assert len(calls) == 3
    assert not (tmp_path / "12.ended").exists()  # its end file is removed

    assert _check(ex, jobs[:1]) == ["11"]  # 11 left no file (killed?): waits for the cap
    assert len(calls) == 3
    ex.next_status_query = 0.0  # the cap has passed
    finished.add("11")
    assert _check(ex, jobs[:1]) == []
    assert len(calls) == 4


def test_nodes_excluded_after_a_node_failure():
    tracked = {"node7", "None assigned", "alice"}
    assert plugin.excluded_nodes(tracked, {"alice"}, requeue=True) == {"alice"}
    assert plugin.excluded_nodes(tracked, {"alice"}, requeue=False) == {"alice", "node7"}


def test_status_queries_name_only_the_active_jobs(tmp_path, monkeypatch):
    """The plugin's sacct/squeue call lists the active jobs (--jobs), not every job of the
    run from the last two days; outside a status check the plugin's commands are its own."""
    ex, _ = _executor(tmp_path, monkeypatch, finished_by_sacct=set())
    seen = []

    async def sacct(self, active_jobs):
        seen.append(upstream.query_job_status_sacct("run-1"))
        seen.append(upstream.query_job_status_squeue("run-1"))
        for job in active_jobs:
            yield job

    monkeypatch.setattr(upstream.Executor, "check_active_jobs", sacct)
    jobs = [types.SimpleNamespace(external_jobid=i) for i in ("12", "9", "100")]
    assert _check(ex, jobs) == ["12", "9", "100"]
    assert all(cmd.endswith("--jobs 9,12,100") and "--name run-1" in cmd for cmd in seen)
    assert "--jobs" not in upstream.query_job_status_sacct("run-1")


def test_array_jobs_are_refused(tmp_path):
    ex = plugin.Executor.__new__(plugin.Executor)
    ex.workflow = types.SimpleNamespace(executor_settings=plugin.ExecutorSettings(array_jobs="all"))
    with pytest.raises(Exception, match="array-jobs is not supported"):
        ex.__post_init__()
