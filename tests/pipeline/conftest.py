"""Shared machinery of the pipeline tests: run the real Snakefile in scratch workspaces.

Three workspaces are built once per pytest run, whatever the number of xdist workers
(:func:`built_once`: the first worker to ask builds it behind a file lock in the directory
the workers share, the others wait and reuse it), each only when a test asks for it:

* ``upstream``: the demo corpus, features, i-vectors and egs of the tiny config (every
  shared stage);
* ``trained``: a copy of it in which the default target ``all`` ran for two experiments
  (:data:`EXPERIMENTS`: the tiny default and a shorter one with plain SGD): models,
  combination, priors, evaluation, decoding, the report and the Kaldi export;
* ``chain_upstream``: a copy of ``upstream`` with the chain tests' egs
  (:data:`CHAIN_EGS`: 30-frame chunks, 4 archives), the egs every chain experiment of
  test_chain.py and test_chain_biphone.py trains on, whatever its tree (the chain tree,
  den graph and supervision, ``chain_den`` and ``chain_sup``, are each test's own).

A test module never changes them: it clones one (``cp -a`` keeps mtimes and Snakemake's
metadata, so nothing already built reruns) and works in its clone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from filelock import FileLock

REPO = Path(__file__).resolve().parents[2]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TINY = REPO / "tests" / "pipeline" / "tiny.yaml"
# every shared stage of the tiny config: the egs, and the eval set's features and i-vectors
UPSTREAM_TARGETS = (
    "egs_all",
    "results/feats/test/feats.scp",
    "results/ivector/test/ivector_online.scp",
    "results/data/test/targets.scp",
)
# The experiments of the shared trained workspace: the tiny default, and a second one that
# differs in length (8 iterations instead of 16) and optimiser (plain SGD), so that each
# test sees two experiments sharing the upstream stages, a comparison and both optimisers.
EXPERIMENTS = {
    "default": {},
    "short": {"trainer": {"num_epochs": 0.25, "ngsgd": {"enabled": False}}},
}
TRAINED_OVERLAY = {"experiments": EXPERIMENTS}
#: The chain tests' egs (test_chain.py, test_chain_biphone.py): 30 input frames (10 outputs
#: at frame subsampling 3) per eg, 120 x 30 frames per archive: 4 archives.
CHAIN_EGS = {"frames_per_eg": 30, "samples_per_iter": 120}
#: The tiny TDNN-F (test_tdnnf.py, and the chain tests' network): input splice ±1,
#: strides 1, 0, 1, so 3 frames of context on each side, the tiny TDNN's own.
TINY_TDNNF = {
    "family": "tdnnf",
    "input_splice": [-1, 0, 1],
    "tdnnf": {
        "tdnn1_dim": 32,
        "dim": 32,
        "bottleneck_dim": 8,
        "time_strides": [1, 0, 1],
        "linear_dim": 8,
        "prefinal_big_dim": 32,
        "prefinal_small_dim": 16,
    },
}
#: The tiny chain experiment (docs/chain.md): the tiny TDNN-F at frame subsampling 3 on the
#: chain objective, the monophone chain tree unless an experiment adds ``model.chain``.
#: Kaldi's chain schedule reads each of the 4 archives f = 3 times an epoch (each time at
#: another frame shift): 1.67 epochs process int(1.67 · 4 · 3) = 20 archives, 13
#: iterations of 1 → 2 jobs.
CHAIN = {
    "model": {**TINY_TDNNF, "frame_subsampling_factor": 3, "objective": "chain"},
    "trainer": {"minibatch_size": 32, "num_epochs": 1.67},
}
#: The tiny default experiment's final model (what the failure tests rebuild and compare).
FINAL = "results/exp/default/final.pt"
#: The local profile's executor (profiles/local): each one-thread Python job forked from a
#: warm server, the same bits as a fresh process (test_warm_executor). The tests whose
#: subject is not the executor run through it, as `--profile profiles/local` does;
#: test_reproducible, test_failures and test_disk_full keep Snakemake's local executor
#: (a fresh interpreter per job), so test_reproducible compares the two paths' files.
WARM = ("--executor", "paravg-warm")
# One snakemake call never takes longer than this (the longest, a tiny run, takes ~3 min).
SNAKEMAKE_TIMEOUT_S = 600


def run_snakemake(
    workdir: Path,
    *args: str,
    overlay: dict | None = None,
    timeout_s: int = SNAKEMAKE_TIMEOUT_S,
    env: dict[str, str] | None = None,
    snakefile: Path = REPO / "Snakefile",
) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile (or ``snakefile``) in ``workdir`` on the tiny config
    (+ ``overlay``), with ``env`` added to the environment.

    Under ``timeout -k``: a hung executor plugin ignores SIGTERM.
    """
    command = snakemake_command(workdir, overlay, snakefile)
    return subprocess.run(
        ["timeout", "-k", "30", str(timeout_s), *command, *args],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env} if env else None,
    )


def snakemake_command(
    workdir: Path, overlay: dict | None = None, snakefile: Path = REPO / "Snakefile"
) -> list[str]:
    """The snakemake command line of the tiny config (+ ``overlay``, written to
    ``workdir/overlay.yaml``) in ``workdir``, without targets or options."""
    configs = [str(TINY)]
    if overlay:
        path = workdir / "overlay.yaml"
        path.write_text(yaml.safe_dump(overlay))
        configs.append(str(path))
    cmd = [SNAKEMAKE, "-s", str(snakefile), "--directory", str(workdir)]
    return [*cmd, "--configfile", *configs]


def tiny_plan(ws: Path, overlay: dict | None = None, experiment: str = "default"):
    """The paravg.plan.ExperimentPlan of an experiment of the tiny config in ``ws``."""
    import json

    from paravg.config import deep_merge, validate_config
    from paravg.plan import experiment_plans

    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg = deep_merge(cfg, yaml.safe_load(TINY.read_text()))
    cfg = deep_merge(cfg, overlay or {})
    validate_config(cfg)
    info = json.loads((ws / "results" / "egs" / "info.json").read_text())
    return experiment_plans(cfg, info)[experiment]


def tiny_schedule(ws: Path, overlay: dict | None = None, experiment: str = "default"):
    """The Kaldi schedule of an experiment of the tiny config in workspace ``ws``."""
    return tiny_plan(ws, overlay, experiment).schedule


def check_ok(proc: subprocess.CompletedProcess, what: str) -> None:
    assert proc.returncode == 0, f"{what} failed (rc={proc.returncode}):\n{proc.stdout[-6000:]}"


def copy_workspace(src: Path, dest: Path) -> Path:
    """``cp -a src dest``: the files, their mtimes and Snakemake's metadata."""
    shutil.copytree(src, dest, symlinks=True, copy_function=shutil.copy2)
    return dest


# ---------------------------------------------------------------- built once per run
@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory) -> Path:
    """The directory every xdist worker of this pytest run shares (the run's base
    temporary directory; each worker's own is a subdirectory of it).

    ``PARAVG_TEST_WORKSPACES=DIR`` keeps the shared workspaces in DIR across runs instead
    (a developer's loop over one pipeline test; delete DIR after changing what builds them).
    """
    if keep := os.environ.get("PARAVG_TEST_WORKSPACES"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        return Path(keep).resolve()
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(shared: Path, name: str, build: Callable[[Path], None]) -> Path:
    """``shared/name``, built by ``build`` by the first worker that asks; the others wait
    for it. A failed build is not retried: every later caller fails with its message."""
    target, done, failed = shared / name, shared / f"{name}.done", shared / f"{name}.failed"
    with FileLock(str(shared / f"{name}.lock")):
        if failed.exists():
            pytest.fail(f"building the shared {name} workspace failed:\n{failed.read_text()}")
        if not done.exists():
            try:
                build(target)
            except BaseException as e:
                failed.write_text(str(e))
                raise
            done.touch()
    return target


@pytest.fixture(scope="session")
def upstream(shared_dir) -> Path:
    """A workspace with every shared stage built for the tiny config: the egs, and the
    eval set's features and i-vectors."""

    def build(d: Path) -> None:
        d.mkdir()
        proc = run_snakemake(d, "--cores", "2", *WARM, *UPSTREAM_TARGETS)
        check_ok(proc, "building the shared stages")

    return built_once(shared_dir, "upstream", build)


@pytest.fixture(scope="session")
def trained(shared_dir, upstream) -> Path:
    """The tiny pipeline's default target ``all`` for :data:`EXPERIMENTS`, from the shared
    upstream stages. Read-only: clone it (:func:`clone_trained`) to run anything in it."""

    def build(d: Path) -> None:
        copy_workspace(upstream, d)
        proc = run_snakemake(d, "--cores", "2", *WARM, overlay=TRAINED_OVERLAY)
        check_ok(proc, "the tiny pipeline (all) for the shared trained workspace")

    return built_once(shared_dir, "trained", build)


@pytest.fixture(scope="session")
def chain_upstream(shared_dir, upstream) -> Path:
    """The upstream workspace with the chain tests' egs (:data:`CHAIN_EGS`) in place of
    the tiny ones. Read-only: clone it (:func:`clone_chain_upstream`)."""

    def build(d: Path) -> None:
        copy_workspace(upstream, d)
        proc = run_snakemake(d, "--cores", "2", *WARM, "egs_all", overlay={"egs": CHAIN_EGS})
        check_ok(proc, "the chain egs for the shared chain_upstream workspace")

    return built_once(shared_dir, "chain_upstream", build)


@pytest.fixture(scope="session")
def clone_upstream(upstream: Path, tmp_path_factory) -> Callable[[str], Path]:
    """Return a function that copies the upstream workspace to a fresh directory."""
    return lambda name: copy_workspace(upstream, tmp_path_factory.mktemp(name) / "ws")


@pytest.fixture(scope="session")
def clone_chain_upstream(chain_upstream: Path, tmp_path_factory) -> Callable[[str], Path]:
    """Return a function that copies the chain_upstream workspace to a fresh directory."""
    return lambda name: copy_workspace(chain_upstream, tmp_path_factory.mktemp(name) / "ws")


@pytest.fixture(scope="session")
def clone_trained(trained: Path, tmp_path_factory) -> Callable[[str], Path]:
    """Return a function that copies the trained workspace to a fresh directory."""
    return lambda name: copy_workspace(trained, tmp_path_factory.mktemp(name) / "ws")


# ---------------------------------------------------------------- a slow job to catch
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


def catch_sleeping_job(
    proc: subprocess.Popen, log_file: Path, timeout_s: float = SNAKEMAKE_TIMEOUT_S
) -> int | None:
    """PID of the job that writes ``log_file``, once it has trained and sleeps (a
    ``simulate.straggler`` job logs ``trained`` before its sleep), while ``proc`` (the
    snakemake run) lives; None if that does not happen within ``timeout_s`` (at most a
    snakemake call's time: test_failures' run from the upstream workspace to iteration 12
    took more than 300 s on the shared 2-core machine at load 15)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None:
        if log_file.exists() and "trained" in log_file.read_text():  # sleeping now
            pid = find_job_process(log_file)
            if pid:
                return pid
        time.sleep(0.2)
    return None
