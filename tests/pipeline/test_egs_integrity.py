"""A damaged egs archive is never trained on (the probe's R5): 64 flipped feature bytes
were trained on silently (another final.pt, exit 0). Each archive's meta.json records the
sha256 of its files, and every reader checks the files it opens first.

A clone of the shared upstream workspace (its egs written with the records) builds the
initial model, 64 bytes of the first training job's archive are flipped (its mtime kept,
as a bad disk does: nothing upstream reruns), and the first training job's own target
must then fail naming the file and the commands that rebuild
the archive, writing none of its outputs. The same damage before the initial model stops
init_model, the first reader of every archive of the LDA-like transform.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .conftest import check_ok, run_snakemake, tiny_plan

pytestmark = pytest.mark.pipeline

EXP = "results/exp/default"


def flip(path: Path, length: int = 64, keep_mtime: bool = False) -> None:
    """Flip ``length`` bytes in the middle of ``path`` (the npy data, not its header);
    ``keep_mtime``: as a bad disk would, so Snakemake sees no change and reruns nothing."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for i in range(middle, middle + length):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def assert_named(proc, feats: str) -> None:
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert f"{feats}: its bytes differ from what the egs stage recorded" in proc.stdout
    prefix = feats.removesuffix(".feats.npy")
    assert f"rm {prefix}.*" in proc.stdout and f"> {prefix}.meta.json" in proc.stdout


def test_the_first_training_job_stops_on_flipped_bytes_of_its_archive(clone_upstream):
    ws = clone_upstream("egs_integrity_job")
    check_ok(run_snakemake(ws, "--cores", "2", f"{EXP}/0.pt"), "init_model")
    archive = tiny_plan(ws).job_archive(0, 0)
    feats = f"results/egs/egs.{archive}.feats.npy"
    flip(ws / feats, keep_mtime=True)  # else init_model reruns first, on the new bytes
    proc = run_snakemake(ws, "--cores", "2", f"{EXP}/1/job0.json")
    assert_named(proc, feats)
    assert "Error in rule train_job" in proc.stdout and "rule init_model" not in proc.stdout
    assert sorted(p.name for p in (ws / EXP / "1").glob("job0*")) == []


def test_init_model_stops_on_flipped_bytes_of_an_archive(clone_upstream):
    ws = clone_upstream("egs_integrity_init")
    feats = "results/egs/egs.0.feats.npy"
    flip(ws / feats)
    proc = run_snakemake(ws, "--cores", "2", f"{EXP}/0.pt")
    assert_named(proc, feats)
    assert not (ws / EXP / "0.pt").exists() and not (ws / EXP / "init.json").exists()
