"""The SLURM path: workflows submitted through `--profile profiles/slurm` to a real cluster.

`tools/local_slurm.sh start` brings up a single-node SLURM cluster on this machine (root,
Debian/Ubuntu; it installs what is missing) with fake GRES GPUs and accounting, so `sacct`
shows what really went through sbatch. Tests marked `slurm` need it and skip, saying why,
where it cannot run. The warm-worker tests (`--paravg-slurm-warm-workers`) run the tiny
pipeline's one-thread jobs in worker allocations, and kill one worker mid-job. Every
snakemake call runs under `timeout -k`: a snakemake whose SLURM plugin lost track of its
jobs ignores SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from .conftest import find_job_process

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "local_slurm.sh"
TOY = REPO / "tests" / "fixtures" / "toy_slurm" / "Snakefile"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# The cluster the slurm profile expects: its default partition, GPUs for train_job.
CLUSTER_ENV = {"LOCAL_SLURM_PARTITION": "main", "LOCAL_SLURM_ACCOUNTING": "1"}
TINY = REPO / "tests" / "pipeline" / "tiny.yaml"
# The tiny pipeline cut to 2 iterations x 2 jobs: enough for a fan-out, a fan-in and a model
# that depends on both, while each SLURM stage costs a status poll (about 15 s here).
TINY_OVERLAY = "trainer:\n  num_epochs: 0.1\n  num_jobs_initial: 2\n  num_jobs_final: 2\n"
FINAL = "results/exp/default/final.pt"
# Seconds before the plugin's first status poll (the profile's 10 s is for real clusters).
# The plugin polls at init, 2 init + 10, 3 init + 30 ... s after a submission: the toy's
# jobs take about 5 s (two snakemake start-ups), the pipeline's 8-15 s (torch imports too),
# so 1 s and 3 s make each stage cost one early poll (12 s, 16 s) rather than a late one.
POLL_TOY = "1"
POLL_PIPELINE = "3"


def snakemake_command(args: list[str], timeout_s: int) -> list[str]:
    """snakemake with ``args`` under `timeout -k 30 timeout_s`."""
    return ["timeout", "-k", "30", str(timeout_s), SNAKEMAKE, *args]


def run_snakemake(args: list[str], cwd: Path, timeout_s: int) -> subprocess.CompletedProcess:
    """Run snakemake under `timeout -k 30`; the output is in the result, stdout + stderr."""
    return subprocess.run(
        snakemake_command(args, timeout_s),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def start_snakemake(args: list[str], cwd: Path, timeout_s: int, output: Path) -> subprocess.Popen:
    """Start snakemake under `timeout -k 30`, its stdout + stderr going to the file ``output``
    (not a pipe: nobody has to read it while waiting for another run)."""
    with output.open("w") as out:
        return subprocess.Popen(
            snakemake_command(args, timeout_s),
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )


def check_ok(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} failed (rc={proc.returncode}):\n{proc.stdout[-6000:]}"


def toy_slurm_args(job_minutes: int = 5) -> list[str]:
    """Snakemake arguments of the toy workflow (1 iteration) through the slurm profile."""
    return [
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--paravg-slurm-init-seconds-before-status-checks",
        POLL_TOY,
        "--config",
        "iterations=1",
        f"job_minutes={job_minutes}",
    ]


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running local SLURM cluster; stopped afterwards if this fixture started it."""
    if os.geteuid() != 0:
        pytest.skip("starting a local SLURM cluster (tools/local_slurm.sh) needs root")
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        pytest.skip("SLURM is not installed and there is no apt-get to install it")
    env = {**os.environ, **CLUSTER_ENV}
    was_up = (
        subprocess.run(["bash", SCRIPT, "status"], env=env, capture_output=True).returncode == 0
    )
    start = subprocess.run(
        ["bash", SCRIPT, "start"], env=env, capture_output=True, text=True, timeout=600
    )
    if start.returncode != 0:
        pytest.fail(f"tools/local_slurm.sh start failed:\n{start.stdout}\n{start.stderr[-6000:]}")
    yield
    if not was_up:
        subprocess.run(["bash", SCRIPT, "stop"], env=env, capture_output=True, timeout=120)


def sacct_jobs(workdir: Path, since: float) -> list[dict[str, str]]:
    """The SLURM jobs submitted from ``workdir`` since ``since`` (epoch s), from sacct."""
    fields = ["JobIDRaw", "WorkDir", "Comment", "State", "AllocTRES", "TimelimitRaw"]
    out = subprocess.run(
        [
            "sacct",
            "-X",
            "-n",
            "-P",
            "--allusers",
            f"--format={','.join(fields)}",
            "-S",
            time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since - 5)),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [dict(zip(fields, line.split("|"), strict=True)) for line in out.splitlines()]
    return [r for r in rows if Path(r["WorkDir"]) == workdir]


def read_tree(root: Path, pattern: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.glob(pattern))}


def test_short_profile_name_resolves_to_the_slurm_profile(tmp_path):
    """`snakemake --profile slurm` from the repository root uses profiles/slurm."""
    assert (REPO / "slurm").resolve() == (REPO / "profiles" / "slurm").resolve()
    proc = run_snakemake(
        ["--profile", "slurm", "--snakefile", str(TOY), "--directory", str(tmp_path), "-n"],
        cwd=REPO,
        timeout_s=120,
    )
    check_ok(proc, "dry-run with --profile slurm")
    train = [b for b in proc.stdout.split("rule ")[1:] if b.startswith("train_job:")]
    assert len(train) == 4
    for block in train:
        resources = block.split("resources:")[1].splitlines()[0]
        assert "gpu=1" in resources and "slurm_partition=main" in resources


@pytest.mark.slurm
def test_toy_workflow_through_slurm_equals_local_run(slurm_cluster, tmp_path):
    """Every job goes through sbatch, train jobs get a GPU, a failed job is retried, and the
    outputs are byte-identical to a local run."""
    local, remote = tmp_path / "local", tmp_path / "slurm"
    for d in (local, remote):
        d.mkdir()
        shutil.copy(TOY, d / "Snakefile")
    check_ok(
        run_snakemake(
            [
                "--profile",
                str(REPO / "profiles" / "local"),
                "--cores",
                "2",
                "--config",
                "iterations=1",
            ],
            local,
            120,
        ),
        "local run",
    )
    (remote / "fail_once").mkdir()
    (remote / "fail_once" / "1_1").touch()  # train job 1 of iteration 0 fails once
    since = time.time()
    proc = run_snakemake(toy_slurm_args(), remote, 300)
    check_ok(proc, "SLURM run")

    assert read_tree(remote, "out/**/*.txt") == read_tree(local, "out/**/*.txt")
    assert len(read_tree(local, "out/**/*.txt")) == 4

    jobs = sacct_jobs(remote, since)
    by_comment: dict[str, list[dict[str, str]]] = {}
    for job in jobs:
        by_comment.setdefault(job["Comment"], []).append(job)
    trains = {f"rule_train_job_wildcards_1_{j}": (1, j) for j in (0, 1)}
    assert set(by_comment) == {"rule_init", "rule_sync_wildcards_1", *trains}, jobs
    retried = by_comment["rule_train_job_wildcards_1_1"]
    assert [j["State"] for j in retried] == ["FAILED", "COMPLETED"], retried
    for comment, runs in by_comment.items():
        assert runs[-1]["State"] == "COMPLETED", runs
        for job in runs:
            assert ("gres/gpu=1" in job["AllocTRES"]) == (comment in trains), job
    for comment, (t, j) in trains.items():
        env = dict(
            line.split("=", 1) for line in (remote / f"out/{t}/job{j}.env").read_text().split()
        )
        assert env["slurm_job_id"] == by_comment[comment][-1]["JobIDRaw"]
        assert env["cuda_visible_devices"] in {"0", "1"}  # a fake GPU, assigned by SLURM


def tiny_pipeline(
    workdir: Path, *args: str, overlay: str = TINY_OVERLAY, timeout_s: int = 600
) -> subprocess.CompletedProcess:
    """The real Snakefile in ``workdir`` on the tiny config + ``overlay``, to final.pt."""
    (workdir / "slurm_overlay.yaml").write_text(overlay)
    configs = [str(TINY), str(workdir / "slurm_overlay.yaml")]
    return run_snakemake(
        ["-s", str(REPO / "Snakefile"), "--directory", str(workdir), "--configfile", *configs,
         *args, FINAL],
        workdir,
        timeout_s,
    )  # fmt: skip


def tiny_pipeline_command(workdir: Path, *args: str, overlay: str = TINY_OVERLAY) -> list[str]:
    (workdir / "slurm_overlay.yaml").write_text(overlay)
    configs = [str(TINY), str(workdir / "slurm_overlay.yaml")]
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir),
            "--configfile", *configs, *args, FINAL]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_local(clone_upstream) -> Path:
    """The tiny pipeline (:data:`TINY_OVERLAY`) run locally: the models every SLURM run of
    it must reproduce bit for bit."""
    local = clone_upstream("slurm_local")
    proc = tiny_pipeline(local, "--profile", str(REPO / "profiles" / "local"), "--cores", "2")
    check_ok(proc, "local")
    return local


@pytest.mark.slurm
def test_tiny_pipeline_through_slurm_gives_the_local_models(
    slurm_cluster, clone_upstream, tiny_local
):
    """The real Snakefile from the shared egs to final.pt through the slurm profile: every
    job is a SLURM job, train jobs hold a (fake) GPU and fall back to the CPU, and every model
    is byte-identical to a local run's."""
    local, remote = tiny_local, clone_upstream("slurm_remote")
    since = time.time()
    proc = tiny_pipeline(
        remote,
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--paravg-slurm-init-seconds-before-status-checks",
        POLL_PIPELINE,
    )
    check_ok(proc, "SLURM run")

    models = read_tree(local, "results/exp/default/**/*.pt")
    assert {"results/exp/default/final.pt", "results/exp/default/2/job1.pt"} <= set(models)
    assert read_tree(remote, "results/exp/default/**/*.pt") == models

    jobs = sacct_jobs(remote, since)
    rules = [j["Comment"].split("_wildcards_")[0].removeprefix("rule_") for j in jobs]
    # the diagnostics of models 0..2 come with the training blocks (off the critical path)
    assert sorted(rules) == sorted(
        [
            "init_model",
            *["train_job"] * 4,
            "average",
            "average",
            *["diagnostics"] * 3,
            "combine",
            "priors",
        ]
    ), jobs
    for job, rule in zip(jobs, rules, strict=True):
        assert job["State"] == "COMPLETED", job
        assert ("gres/gpu=1" in job["AllocTRES"]) == (rule == "train_job"), job
    if not torch.cuda.is_available():
        logs = sorted((remote / "logs" / "train_job" / "default").glob("*/job*.log"))
        assert len(logs) == 4
        for log in logs:
            assert "paravg.devices: using the CPU" in log.read_text(), log


# Warm workers on this cluster (2 CPUs, 2 fake GPUs): two allocations of one worker and one
# GPU each; an idle one stops after 5 s, so the two-thread jobs (combine, priors) find CPUs.
WARM = [
    "--paravg-slurm-warm-workers", "1",
    "--paravg-slurm-warm-allocations", "2",
    "--paravg-slurm-warm-gpus", "1",
    "--paravg-slurm-warm-idle-seconds", "5",
]  # fmt: skip
WARM_ALLOCATION = "paravg_warm_workers"  # their sacct comment


def slurm_profile_args() -> list[str]:
    return [
        "--profile",
        str(REPO / "profiles" / "slurm"),
        "--paravg-slurm-init-seconds-before-status-checks",
        POLL_PIPELINE,
    ]


@pytest.mark.slurm
def test_tiny_pipeline_in_warm_workers_gives_the_local_models(
    slurm_cluster, clone_upstream, tiny_local
):
    """--paravg-slurm-warm-workers: every one-thread job (init, train jobs, averages,
    diagnostics) runs in a fork of a worker allocation's warm server, only the two-thread
    jobs are SLURM jobs of their own, and every model is the local run's, bit for bit."""
    ws = clone_upstream("slurm_warm")
    since = time.time()
    proc = tiny_pipeline(ws, *slurm_profile_args(), *WARM)
    check_ok(proc, "SLURM run with warm workers")
    models = read_tree(tiny_local, "results/exp/default/**/*.pt")
    assert read_tree(ws, "results/exp/default/**/*.pt") == models

    jobs = sacct_jobs(ws, since)
    own = sorted(
        j["Comment"].split("_wildcards_")[0] for j in jobs if j["Comment"] != WARM_ALLOCATION
    )
    assert own == ["rule_combine", "rule_priors"], jobs
    allocations = [j for j in jobs if j["Comment"] == WARM_ALLOCATION]
    assert 1 <= len(allocations) <= 4 and all(j["State"] == "COMPLETED" for j in allocations), jobs
    assert all("gres/gpu=1" in j["AllocTRES"] for j in allocations), allocations
    served = "".join(p.read_text() for p in (ws / ".snakemake" / "slurm_logs").rglob("*.log"))
    for rule, count in (("init_model", 1), ("train_job", 4), ("average", 2), ("diagnostics", 3)):
        assert served.count(f"({rule} {{") == count, (rule, served[-3000:])
    assert "stopped by the main snakemake" in served


@pytest.mark.slurm
def test_a_killed_warm_worker_is_noticed_and_its_job_rerun(
    slurm_cluster, clone_upstream, tiny_local
):
    """The worker running a (slow) train job is killed with SIGKILL: the job's process dies
    with it, the main snakemake notices the allocation's end, fails the job, and --retries
    reruns it in another allocation; the models are still the local run's."""
    ws = clone_upstream("slurm_warm_kill")
    overlay = TINY_OVERLAY + "simulate:\n  straggler: {job: 1, factor: 100.0, iteration: 1}\n"
    cmd = tiny_pipeline_command(ws, *slurm_profile_args(), *WARM, "--retries", "1", overlay=overlay)
    since = time.time()
    proc = subprocess.Popen(
        ["timeout", "-k", "30", "600", *cmd],
        cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        log = ws / "logs" / "train_job" / "default" / "2" / "job1.log"
        child, deadline = None, time.time() + 300
        while child is None and time.time() < deadline and proc.poll() is None:
            if log.exists() and "trained" in log.read_text():  # sleeping now
                child = find_job_process(log)
            time.sleep(0.2)
        assert child is not None, "the slow job was never caught sleeping"
        forkserver = int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1])
        worker = int(Path(f"/proc/{forkserver}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert "paravg_warm.worker" in Path(f"/proc/{worker}/cmdline").read_text()
        os.kill(worker, signal.SIGKILL)
        time.sleep(1)
        assert (
            not Path(f"/proc/{child}").exists()
            or "State:\tZ" in Path(f"/proc/{child}/status").read_text()
        ), "the job outlived its worker"
        out = proc.communicate(timeout=600)[0]
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-6000:]
    assert "lost (its batch script ended (exit status 137))" in out, out[-6000:]
    assert "Trying to restart job" in out
    assert read_tree(ws, "results/exp/default/**/*.pt") == read_tree(
        tiny_local, "results/exp/default/**/*.pt"
    )
    allocations = [j for j in sacct_jobs(ws, since) if j["Comment"] == WARM_ALLOCATION]
    assert [j["State"] for j in allocations].count("FAILED") == 1, allocations


def toy_start(workdir: Path, *args: str, timeout_s: int = 600) -> subprocess.Popen:
    """Start the toy workflow in ``workdir`` through the slurm profile (1 iteration x 2 jobs,
    1-min train jobs); its output goes to ``workdir``.out."""
    workdir.mkdir(exist_ok=True)
    shutil.copy(TOY, workdir / "Snakefile")
    return start_snakemake(
        [*toy_slurm_args(job_minutes=1), *args],
        workdir,
        timeout_s,
        workdir.with_name(workdir.name + ".out"),
    )


def submissions(workdir: Path, since: float) -> dict[str, list[dict[str, str]]]:
    """SLURM jobs from ``workdir`` since ``since``, by job comment (rule and wildcards)."""
    out: dict[str, list[dict[str, str]]] = {}
    for job in sacct_jobs(workdir, since):
        out.setdefault(job["Comment"], []).append(job)
    return out


@dataclass
class ToyRun:
    workdir: Path
    since: float  # when it started (epoch s), for submissions()
    proc: subprocess.CompletedProcess  # its output (stdout + stderr) in .stdout


@pytest.fixture(scope="module")
def time_limit_runs(slurm_cluster, tmp_path_factory) -> dict[str, ToyRun]:
    """Two runs of the toy workflow side by side, each waiting out a train job's 1-min time
    limit, so that the two waits overlap instead of following each other:

    - "time_limit": train job (1, 1) hangs on its first attempt only (the profile's
      retries: 1);
    - "hanging": train job (1, 0) hangs on every attempt, with --retries 0.

    Each run lists only its own jobs (sacct by job id, :func:`sacct_jobs` by work dir). The
    cluster has 2 CPUs, one per job: "hanging" starts first and "time_limit" only once both
    of hanging's train jobs run, so that hanging's other job (1, 1) cannot wait behind the
    two hanging jobs until its own run fails and cancels it. Either test alone still runs
    both (one wait all the same)."""
    root = tmp_path_factory.mktemp("time_limits")
    markers = {"time_limit": "hang_once/1_1", "hanging": "hang/1_0"}
    for name, marker in markers.items():
        (root / name / marker).parent.mkdir(parents=True)
        (root / name / marker).touch()
    since: dict[str, float] = {}
    started: dict[str, subprocess.Popen] = {}

    def output(name: str) -> str:
        return (root / f"{name}.out").read_text()

    try:
        since["hanging"] = time.time()
        started["hanging"] = toy_start(root / "hanging", "--retries", "0")
        logs = [root / "hanging" / "logs" / "train_job" / f"1_{j}.log" for j in (0, 1)]
        deadline = time.time() + 240
        while not all(log.exists() for log in logs):
            assert time.time() < deadline and started["hanging"].poll() is None, (
                "hanging: its train jobs never both ran:\n" + output("hanging")[-4000:]
            )
            time.sleep(0.5)
        since["time_limit"] = time.time()
        started["time_limit"] = toy_start(root / "time_limit")
        for proc in started.values():
            proc.wait(timeout=660)
    finally:
        for proc in started.values():
            if proc.poll() is None:  # the fixture failed: snakemake cancels its SLURM jobs
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=60)
    return {
        name: ToyRun(
            root / name,
            since[name],
            subprocess.CompletedProcess(proc.args, proc.returncode, output(name)),
        )
        for name, proc in started.items()
    }


@pytest.mark.slurm
def test_a_job_killed_at_its_time_limit_is_retried_alone_with_more_time(time_limit_runs):
    """Job 1 of iteration 0 hangs on its first attempt: SLURM ends it at its runtime limit
    (1 min), snakemake resubmits only it, with the attempt-scaled limit (2 min), and the
    run completes with every other job submitted once. (Run beside the next test's run:
    :func:`time_limit_runs`.)"""
    run = time_limit_runs["time_limit"]
    check_ok(run.proc, "time_limit: SLURM run with a job over its time limit")
    jobs = submissions(run.workdir, run.since)
    retried = jobs.pop("rule_train_job_wildcards_1_1")
    assert [(j["State"], j["TimelimitRaw"]) for j in retried] == [
        ("TIMEOUT", "1"),
        ("COMPLETED", "2"),
    ], f"time_limit: the job over its time limit and its retry: {retried}"
    assert set(jobs) == {"rule_init", "rule_train_job_wildcards_1_0", "rule_sync_wildcards_1"}, (
        f"time_limit: the jobs other than the one over its time limit: {jobs}"
    )
    assert all(len(runs) == 1 and runs[0]["State"] == "COMPLETED" for runs in jobs.values()), (
        f"time_limit: a job other than the one over its time limit ran twice or failed: {jobs}"
    )
    assert (run.workdir / "out" / "model.1.txt").exists(), "time_limit: no final model"


@pytest.mark.slurm
def test_a_hanging_job_is_ended_by_its_runtime_and_reported(time_limit_runs):
    """A job that never ends is ended by SLURM at its runtime; snakemake stops and names it.
    (Run beside the previous test's run: :func:`time_limit_runs`.)"""
    run = time_limit_runs["hanging"]
    proc, workdir = run.proc, run.workdir
    assert proc.returncode != 0, f"hanging: the run did not fail:\n{proc.stdout[-4000:]}"
    jobs = submissions(workdir, run.since)
    hung = jobs["rule_train_job_wildcards_1_0"]
    assert [j["State"] for j in hung] == ["TIMEOUT"], f"hanging: the hanging job: {hung}"
    reported = f"hanging: the report of the hanging job:\n{proc.stdout[-4000:]}"
    assert "Error in rule train_job" in proc.stdout, reported
    assert "TIMEOUT" in proc.stdout and hung[0]["JobIDRaw"] in proc.stdout, reported
    assert "logs/train_job/1_0.log" in proc.stdout, reported  # where the job's own output is
    assert not (workdir / "out" / "1" / "job0.txt").exists(), "hanging: the hung job's output"
    # the other job's output stays
    assert (workdir / "out" / "1" / "job1.txt").exists(), "hanging: the other job's output"


@pytest.mark.slurm
def test_a_node_that_goes_down_mid_job_costs_only_that_job(slurm_cluster, tmp_path):
    """The node of a running job goes down (scontrol ... state=down): SLURM ends the job
    (NODE_FAIL) and requeues it under the same id (the profile's requeue: true), it runs
    again when the node is back, and no other job runs twice."""
    node = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True
    ).stdout.split()[0]
    (tmp_path / "hang_once").mkdir()
    (tmp_path / "hang_once" / "1_1").touch()  # keeps job (1, 1) running until the node fails
    since = time.time()
    shutil.copy(TOY, tmp_path / "Snakefile")
    proc = subprocess.Popen(
        ["timeout", "-k", "30", "600", SNAKEMAKE, *toy_slurm_args()],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    scontrol = ["scontrol", "update", f"nodename={node}"]
    try:
        log = tmp_path / "logs" / "train_job" / "1_1.log"

        def other_done() -> bool:  # job (1, 0) has ended (as SLURM sees it) before the failure
            states = submissions(tmp_path, since).get("rule_train_job_wildcards_1_0", [])
            return [j["State"] for j in states] == ["COMPLETED"]

        deadline = time.time() + 240
        while time.time() < deadline and not (
            log.exists() and "hang" in log.read_text() and other_done()
        ):
            time.sleep(1)
        assert log.exists() and other_done(), "job (1, 1) never hung beside a finished (1, 0)"
        subprocess.run([*scontrol, "state=down", "reason=paravg-test"], check=True)
        time.sleep(5)
    finally:
        subprocess.run([*scontrol, "state=resume"], check=False)
    out = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, out[-6000:]
    jobs = submissions(tmp_path, since)
    assert (tmp_path / "out" / "model.1.txt").exists()
    assert set(jobs) == {
        "rule_init",
        "rule_train_job_wildcards_1_0",
        "rule_train_job_wildcards_1_1",
        "rule_sync_wildcards_1",
    }, jobs
    assert all(len(runs) == 1 and runs[0]["State"] == "COMPLETED" for runs in jobs.values()), jobs
    requeued = subprocess.run(  # every run of the requeued job, its node failure first
        ["sacct", "-D", "-X", "-n", "-P", "-o", "State", "-j",
         jobs["rule_train_job_wildcards_1_1"][0]["JobIDRaw"]],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert requeued[0] in ("NODE_FAIL", "REQUEUED") and requeued[-1] == "COMPLETED", requeued
