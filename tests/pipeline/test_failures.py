"""Failures cost only the failed job: SIGKILL of one job and of snakemake itself mid-run,
damaged, truncated and diverged models.

The reference is the shared trained workspace (its ``default`` experiment is the tiny
config's). The SIGKILL test trains the tiny pipeline from the shared egs to ``final.pt``
with one training job of a middle iteration made slow (the ``simulate.straggler`` aid:
it sleeps after training, before writing; timing only, not a param). First that job is
killed with SIGKILL while it sleeps: snakemake reports it, and the same command runs only
it and what depends on it. Then snakemake itself is killed (SIGKILL, a lost session) while
the job sleeps again; after ``--unlock`` the same command completes. ``final.pt`` must be
bit-identical to the reference's. The other tests damage models in their own copies of
the trained workspace and target only what reads them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import (
    FINAL,
    catch_sleeping_job,
    check_ok,
    find_job_process,
    run_snakemake,
    snakemake_command,
    tiny_plan,
    tiny_schedule,
)

pytestmark = pytest.mark.pipeline


def model_mtimes(exp: Path) -> dict[str, int]:
    """mtime of every model file of an experiment (synced models and job models)."""
    return {str(p): p.stat().st_mtime_ns for p in exp.rglob("*.pt")}


def start_and_catch_sleeping_job(ws: Path, straggler: dict, log_file: Path):
    """Start the run to ``final.pt``; return (its Popen, the PID of the job that writes
    ``log_file``) once that job has trained and sleeps, or (Popen, None) if it never does."""
    cmd = [*snakemake_command(ws, straggler), "--cores", "2", "--rerun-incomplete", FINAL]
    proc = subprocess.Popen(
        cmd, cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return proc, catch_sleeping_job(proc, log_file)


def test_sigkilled_job_and_snakemake_resume_and_the_result_is_identical(
    clone_upstream, trained, straggler, victim
):
    ws = clone_upstream("killed")
    exp = ws / "results" / "exp" / "default"
    log_file = ws / "logs" / "train_job" / "default" / str(victim) / "job1.log"
    job_model = exp / str(victim) / "job1.pt"

    # 1. SIGKILL of one job: snakemake reports it and stops; nothing half-written
    proc, pid = start_and_catch_sleeping_job(ws, straggler, log_file)
    if pid:
        os.kill(pid, signal.SIGKILL)
    out = proc.communicate(timeout=300)[0]
    assert pid, "did not catch the training job:\n" + out[-3000:]
    assert proc.returncode != 0, "snakemake should report the killed job"
    assert not job_model.exists(), "no half-written model"
    before = model_mtimes(exp)

    plan = run_snakemake(ws, "-n", "--cores", "2", FINAL, overlay=straggler)
    check_ok(plan, "dry-run after the kill")
    planned = [f for line in re.findall(r"output: (.*)", plan.stdout) for f in line.split(", ")]
    trains = [o for o in planned if re.search(r"/job\d+\.pt", o)]
    assert f"results/exp/default/{victim}/job1.pt" in trains, trains
    assert not set(trains) & {p.removeprefix(f"{ws}/") for p in before}, "finished jobs rerun"
    assert all(int(re.search(r"/(\d+)/job", o).group(1)) >= victim for o in trains), trains

    # 2. SIGKILL of snakemake itself while the rerun job sleeps (a lost session): the
    # orphaned job finishes on its own; the next run stops on the lock, and after
    # --unlock the same command completes
    log_file.unlink()
    proc, pid = start_and_catch_sleeping_job(ws, straggler, log_file)
    proc.send_signal(signal.SIGKILL)
    out = proc.communicate(timeout=60)[0]
    assert pid, "did not catch the rerun training job:\n" + out[-3000:]
    while find_job_process(log_file):  # the orphan still sleeps, then writes job1.pt
        time.sleep(0.2)
    locked = run_snakemake(ws, "--cores", "2", "--rerun-incomplete", FINAL, overlay=straggler)
    assert locked.returncode != 0 and "LockException" in locked.stdout, locked.stdout[-3000:]
    check_ok(run_snakemake(ws, "--unlock", overlay=straggler), "--unlock")
    rerun = run_snakemake(ws, "--cores", "2", "--rerun-incomplete", FINAL, overlay=straggler)
    check_ok(rerun, "the run after the kills")

    after = model_mtimes(exp)
    for path, mtime in before.items():
        assert after[path] == mtime, f"{path} was rewritten by the reruns"
    ref = trained / "results" / "exp" / "default" / "final.pt"
    assert (exp / "final.pt").read_bytes() == ref.read_bytes()


def test_a_damaged_synced_model_is_rebuilt_by_the_commands_its_error_gives(
    clone_trained, straggler
):
    """A byte of <m>.pt changes after the run (the job models are gone, as with
    run.keep_job_models: false): its reader stops naming the rule and two commands; they
    rebuild exactly that file (iteration m − 1 retrains from <m−1>.pt), bit for bit, and
    the run then completes with the same final.pt."""
    ws = clone_trained("damaged")
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

    proc = run_snakemake(ws, "--cores", "2", FINAL, overlay=overlay)
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
    check_ok(run_snakemake(ws, "--cores", "2", FINAL, overlay=overlay), "the run after the rebuild")
    assert (exp / "final.pt").read_bytes() == final


def two_job_dirs(ws: Path) -> list[int]:
    """Job directories (t + 1) of the iterations t that ran two jobs."""
    sched = tiny_schedule(ws)
    return [t + 1 for t in range(sched.num_iters) if sched.num_jobs(t) >= 2]


def test_truncated_job_model_is_detected_not_averaged(clone_trained, straggler):
    ws = clone_trained("truncated")
    exp = ws / "results" / "exp" / "default"
    t = two_job_dirs(ws)[0]
    job = exp / str(t) / "job0.pt"
    job.write_bytes(job.read_bytes()[:200])  # a file cut short by a crash of an older run
    (exp / f"{t}.pt").unlink()
    target = f"results/exp/default/{t}.pt"
    check_ok(run_snakemake(ws, "--cores", "2", target, overlay=straggler), "rerun")
    summary = json.loads((exp / "sync" / f"{t}.json").read_text())
    assert summary["accepted"] == [1], summary
    assert any("job 0" in p and "job0.pt" in p for p in summary["problems"])
    log = (ws / "logs" / "average" / "default" / f"{t}.log").read_text()
    assert "excluding job 0" in log


def test_all_jobs_diverged_stops_with_a_message(clone_trained, straggler):
    ws = clone_trained("diverged")
    exp = ws / "results" / "exp" / "default"
    t = two_job_dirs(ws)[-1]
    for stats in (exp / str(t)).glob("job*.json"):
        data = json.loads(stats.read_text())
        data["objf"] = float("nan")
        stats.write_text(json.dumps(data))
    (exp / f"{t}.pt").unlink()
    proc = run_snakemake(ws, "--cores", "2", f"results/exp/default/{t}.pt", overlay=straggler)
    assert proc.returncode != 0
    assert not (exp / f"{t}.pt").exists()
    log = (ws / "logs" / "average" / "default" / f"{t}.log").read_text()
    assert re.search(rf"iteration {t - 1}: no acceptable job among \d+: job 0", log), log[-2000:]


def test_more_jobs_than_egs_archives_stops_before_any_egs_are_built(clone_upstream):
    """num_jobs_final above the number of archives is named with the experiment and the
    key: at start-up when the egs exist (the message alone), and right after the egs plan
    (which counts the archives) when they do not, before any split job or archive is
    written. There it comes from an input function, which Snakemake wraps in its
    InputFunctionException frame: the line is printed first, on a line of its own (W5)."""
    ws = clone_upstream("too_many_jobs")
    too_many = {"trainer": {"num_jobs_initial": 1, "num_jobs_final": 99}}
    expected = re.compile(
        # a line of its own, at start-up as after the egs plan
        r"^ConfigError: experiment 'default': "
        r"trainer\.num_jobs_final \(99\) must be <= the number of egs archives "
        r"\((\d+)\): lower it or lower egs\.samples_per_iter$",
        re.M,
    )
    proc = run_snakemake(ws, "-n", "--cores", "2", FINAL, overlay=too_many)
    assert proc.returncode != 0 and expected.search(proc.stdout), proc.stdout[-3000:]
    assert " in file " not in proc.stdout and "Traceback" not in proc.stdout

    egs = ws / "results" / "egs"
    num_archives = json.loads((egs / "info.json").read_text())["num_archives"]
    subprocess.run(["rm", "-rf", str(egs)], check=True)
    proc = run_snakemake(ws, "--cores", "2", FINAL, overlay=too_many)
    found = expected.search(proc.stdout)
    assert proc.returncode != 0 and found, proc.stdout[-3000:]
    assert int(found.group(1)) == num_archives
    assert proc.stdout.index(found.group(0)) < proc.stdout.index("InputFunctionException")
    assert "Finished jobid" in proc.stdout and "rule egs_split" not in proc.stdout
    built = sorted(p.name for p in egs.rglob("*") if p.is_file())
    assert not any(name.startswith(("egs.", "job.0.", "valid_diag.")) for name in built), built
