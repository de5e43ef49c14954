"""The SLURM path: workflows submitted through `--profile profiles/slurm` to a real cluster.

`tools/local_slurm.sh start` brings up a single-node SLURM cluster on this machine (root,
Debian/Ubuntu; it installs what is missing) with fake GRES GPUs and accounting, so `sacct`
shows what really went through sbatch. Tests marked `slurm` need it and skip, saying why,
where it cannot run. Every snakemake call runs under `timeout -k`: a snakemake whose SLURM
plugin lost track of its jobs ignores SIGTERM.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "local_slurm.sh"
TOY = REPO / "tests" / "fixtures" / "toy_slurm" / "Snakefile"
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# The cluster the slurm profile expects: its default partition, GPUs for train_job.
CLUSTER_ENV = {"LOCAL_SLURM_PARTITION": "main", "LOCAL_SLURM_ACCOUNTING": "1"}
# Seconds before the plugin's first status poll (the profile's 10 s is for real clusters).
POLL = "1"


def run_snakemake(args: list[str], cwd: Path, timeout_s: int) -> subprocess.CompletedProcess:
    """Run snakemake under `timeout -k 30`; the output is in the result, stdout + stderr."""
    return subprocess.run(
        ["timeout", "-k", "30", str(timeout_s), SNAKEMAKE, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def check_ok(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} failed (rc={proc.returncode}):\n{proc.stdout[-6000:]}"


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
    fields = ["JobIDRaw", "WorkDir", "Comment", "State", "AllocTRES"]
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
        run_snakemake(["--profile", str(REPO / "profiles" / "local"), "--cores", "2"], local, 120),
        "local run",
    )
    (remote / "fail_once").mkdir()
    (remote / "fail_once" / "2_1").touch()  # train job 1 of iteration 1 fails once
    since = time.time()
    proc = run_snakemake(
        [
            "--profile",
            str(REPO / "profiles" / "slurm"),
            "--slurm-init-seconds-before-status-checks",
            POLL,
        ],
        remote,
        300,
    )
    check_ok(proc, "SLURM run")

    assert read_tree(remote, "out/**/*.txt") == read_tree(local, "out/**/*.txt")
    assert len(read_tree(local, "out/**/*.txt")) == 7

    jobs = sacct_jobs(remote, since)
    by_comment: dict[str, list[dict[str, str]]] = {}
    for job in jobs:
        by_comment.setdefault(job["Comment"], []).append(job)
    trains = {f"rule_train_job_wildcards_{t}_{j}": (t, j) for t in (1, 2) for j in (0, 1)}
    expected = {"rule_init", "rule_sync_wildcards_1", "rule_sync_wildcards_2", *trains}
    assert set(by_comment) == expected, jobs
    retried = by_comment["rule_train_job_wildcards_2_1"]
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
