"""Shared machinery of the pipeline tests: run the real Snakefile in scratch workspaces.

Building the demo corpus, features, i-vectors and egs of the tiny config takes most of a
tiny run, and every pipeline test needs them unchanged, so they are built once per
session (:func:`upstream`) and each test module clones that workspace (``cp -a`` keeps
mtimes and Snakemake's metadata, so nothing upstream reruns) and trains from there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

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


def run_snakemake(
    workdir: Path,
    *args: str,
    overlay: dict | None = None,
    timeout_s: int = 1800,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """Run the repository's Snakefile in ``workdir`` on the tiny config (+ ``overlay``),
    with ``env`` added to the environment.

    Under ``timeout -k``: a hung executor plugin ignores SIGTERM.
    """
    configs = [str(TINY)]
    if overlay:
        path = workdir / "overlay.yaml"
        path.write_text(yaml.safe_dump(overlay))
        configs.append(str(path))
    cmd = [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--configfile", *configs, *args]
    return subprocess.run(
        ["timeout", "-k", "30", str(timeout_s), *cmd],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **env} if env else None,
    )


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


@pytest.fixture(scope="session")
def upstream(tmp_path_factory) -> Path:
    """A workspace with every shared stage built for the tiny config: the egs, and the
    eval set's features and i-vectors."""
    d = tmp_path_factory.mktemp("upstream")
    check_ok(run_snakemake(d, "--cores", "2", *UPSTREAM_TARGETS), "building the shared stages")
    return d


@pytest.fixture(scope="session")
def clone_upstream(upstream: Path, tmp_path_factory) -> Callable[[str], Path]:
    """Return a function that copies the upstream workspace to a fresh directory."""

    def clone(name: str) -> Path:
        dest = tmp_path_factory.mktemp(name) / "ws"
        shutil.copytree(upstream, dest, symlinks=True, copy_function=shutil.copy2)
        return dest

    return clone
