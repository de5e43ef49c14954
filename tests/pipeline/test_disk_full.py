"""The disk fills up while the egs archives are written; freeing space and running the same
command again completes them bit for bit.

The shared egs of the tiny config are the reference. A clone keeps the egs plan (the
checkpoint's info.json and lists) on a small tmpfs mounted at ``results/egs`` that holds
about half of the archives; ``snakemake egs_all`` must then fail with a message that says
the disk is full, leave no temporary and no half-written file under a final name, and,
after the tmpfs is enlarged, the same command must write every archive and subset
byte-identical to the reference. Needs root (mount); skipped where mounting is impossible.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def mount_tmpfs(path: Path, size: int) -> None:
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")


def files_under(d: Path) -> dict[str, Path]:
    return {str(p.relative_to(d)): p for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def small_egs_dir(clone_upstream):
    ws = clone_upstream("disk_full")
    egs = ws / "results" / "egs"
    ref = ws / "egs_reference"
    shutil.move(egs, ref)
    egs.mkdir()
    plan = 4096 + sum(p.stat().st_size for p in (ref / "lists").iterdir())
    archives = sum(p.stat().st_size for p in ref.glob("*.npy"))
    mount_tmpfs(egs, (plan + archives // 2) // 4096 * 4096 + 8 * 4096)
    try:
        shutil.copy2(ref / "info.json", egs / "info.json")
        shutil.copytree(ref / "lists", egs / "lists", copy_function=shutil.copy2)
        yield ws, egs, ref
    finally:
        subprocess.run(["umount", "-l", str(egs)], check=False)


def test_disk_full_while_writing_egs_then_rerun_is_identical(small_egs_dir):
    ws, egs, ref = small_egs_dir
    proc = run_snakemake(ws, "--cores", "2", "egs_all")
    assert proc.returncode != 0, "the egs fit in half their size?"
    logs = "".join(p.read_text() for p in (ws / "logs").rglob("*.log") if "egs" in str(p))
    assert "no space left on the device" in logs and "free space there and run" in logs.lower()
    assert "Bus error" not in proc.stdout and "SIGBUS" not in proc.stdout
    left = files_under(egs)
    assert [n for n in left if n.split("/")[-1].startswith(".")] == []  # no temporaries
    for name, path in left.items():  # whatever exists under a final name is complete
        if (ref / name).exists():
            assert filecmp.cmp(path, ref / name, shallow=False), name
    subprocess.run(["mount", "-o", "remount,size=512m", str(egs)], check=True)
    check_ok(run_snakemake(ws, "--cores", "2", "egs_all"), "rerun after freeing space")
    got, want = files_under(egs), files_under(ref)
    want = {n: p for n, p in want.items() if not n.startswith("split/")}  # temp() files
    assert sorted(got) == sorted(want)
    for name in want:
        assert filecmp.cmp(got[name], want[name], shallow=False), name
