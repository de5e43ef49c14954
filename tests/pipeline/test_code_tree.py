"""The jobs run the code tree of the Snakefile they were started from.

The venv's editable install names one checkout; a second checkout sharing that venv (a
branch beside main, a colleague's copy) runs its own Snakefile, and every job must import
*its* ``paravg``, not the install's, or one run would mix two code trees silently. The
test copies the repository's code into a scratch checkout whose ``paravg/__init__.py``
records each process that imports it, runs a real job (``prepare_data``) from the copy
with both executors, and asserts that a process besides the main snakemake imported the
copy (with the jobs importing the install's tree, only the main snakemake would).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .conftest import REPO, WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

CODE = ("Snakefile", "paravg", "rules", "scripts", "config", "envs", "report")
PROBE = """
import os as _os

if _os.environ.get("PARAVG_IMPORT_PROBE"):
    with open(_os.environ["PARAVG_IMPORT_PROBE"], "a") as _probe:
        _probe.write(f"{_os.getpid()} {__file__}\\n")
"""


def copy_checkout(dest: Path) -> Path:
    """This repository's code under ``dest``, its ``paravg`` recording who imports it."""
    dest.mkdir()
    for name in CODE:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / name)
    with open(dest / "paravg" / "__init__.py", "a") as init:
        init.write(PROBE)
    return dest


@pytest.mark.parametrize("executor", ["local", "warm"])
def test_jobs_import_the_snakefiles_tree(upstream, tmp_path, executor):
    checkout = copy_checkout(tmp_path / "checkout")
    ws = tmp_path / "ws"
    user = ws / "user"
    for name in ("train", "test"):
        shutil.copytree(upstream / "results/demo" / name, user / name)
        scp = user / name / "targets.scp"
        scp.write_text(scp.read_text().replace(f"results/demo/{name}/", f"user/{name}/"))
    # the wav.scp lines name results/demo/wav/... relative to the workspace
    (ws / "results/demo").mkdir(parents=True)
    (ws / "results/demo/wav").symlink_to(upstream / "results/demo/wav")
    overlay = {"data": {"sets": {"train": str(user / "train"), "test": str(user / "test")}}}
    probe = tmp_path / "imports.txt"
    target = "results/data/test/report.json"
    args = ["--cores", "1", *(WARM if executor == "warm" else ()), target]
    env = {"PARAVG_IMPORT_PROBE": str(probe)}
    proc = run_snakemake(ws, *args, overlay=overlay, env=env, snakefile=checkout / "Snakefile")
    check_ok(proc, f"prepare_data from a second checkout ({executor} executor)")
    assert (ws / target).exists()
    imports = [line.split(" ", 1) for line in probe.read_text().splitlines()]
    assert {file for _, file in imports} == {str(checkout / "paravg" / "__init__.py")}
    pids = {pid for pid, _ in imports}
    assert len(pids) >= 2, f"only the main snakemake imported the copy's paravg: {imports}"
    assert str(os.getpid()) not in pids
