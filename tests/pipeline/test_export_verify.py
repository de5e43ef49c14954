"""``python -m paravg.export --verify`` on the export the pipeline wrote (rule export_kaldi
in the shared trained workspace), not one written without Snakemake: Snakemake adds its
``.snakemake_timestamp`` marker to the directory output, which made every pipeline export
"damaged" (the probe's R3). An intact export passes (vosk loads it and decodes); each kind
of damage fails with its own message, before vosk is asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.pipeline

KALDI = Path("results/exp/default/kaldi")


def verify(ws: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "paravg.export", "--verify", str(KALDI)]
    return subprocess.run(cmd, cwd=ws, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def export(clone_trained) -> Path:
    ws = clone_trained("export_verify")
    assert (ws / KALDI / ".snakemake_timestamp").is_file()  # what made it fail
    return ws


def test_an_intact_pipeline_export_passes(export):
    proc = verify(export)
    assert proc.returncode == 0, proc.stderr
    assert '"vosk_hypothesis"' in proc.stdout


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = {
    "flipped byte": (
        lambda d: flip_a_byte(d / "am" / "final.mdl"),
        "am/final.mdl: its bytes differ from what the export wrote",
    ),
    "missing file": (lambda d: (d / "conf" / "model.conf").unlink(), "conf/model.conf: missing"),
    "extra file": (
        lambda d: (d / "README.txt").write_text("notes\n"),
        "README.txt: not written by the export",
    ),
    "cut-short file": (
        lambda d: (d / "graph" / "HCLG.fst").write_bytes(
            (d / "graph" / "HCLG.fst").read_bytes()[:3000]
        ),
        "graph/HCLG.fst: 3000 bytes, the export wrote",
    ),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_each_kind_of_damage_fails_with_its_message(export, tmp_path, kind):
    import shutil

    ws = tmp_path / "ws"
    (ws / KALDI).parent.mkdir(parents=True)
    shutil.copytree(export / KALDI, ws / KALDI, copy_function=shutil.copy2)
    damage, message = DAMAGE[kind]
    damage(ws / KALDI)
    proc = verify(ws)
    assert proc.returncode == 1
    assert "the export is damaged" in proc.stderr
    problems = [line.strip() for line in proc.stderr.splitlines()[1:] if line.startswith("  ")]
    assert problems == [line for line in problems if message in line] and len(problems) == 1, (
        proc.stderr
    )
