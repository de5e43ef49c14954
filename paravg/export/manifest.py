"""The export's manifest: every file of an exported directory with its size and sha256.

:func:`paravg.export.layout.export_model` records ``files`` in ``export.json``
(``{"am/final.mdl": {"bytes": ..., "sha256": ...}, ...}``, every file but export.json
itself). Two checks read it:

* :func:`stat_problems`: files missing, or of another size (stat only, cheap enough for
  every snakemake start even with a GB-sized HCLG.fst): what the DAG checks before it
  decides that a finished export needs nothing (rules/common.smk);
* :func:`verify_export`: every file's sha256, then vosk (Kaldi's own online decoder) loads
  the directory and decodes a second of audio: ``python -m paravg.export --verify DIR``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import wave
from pathlib import Path

import numpy as np

from paravg.errors import ModelFileError

SUMMARY = "export.json"
#: What Snakemake itself writes into a ``directory()`` output after the job (the mtime
#: marker of ``results/exp/<e>/kaldi``): not the export's, never in the manifest, not
#: "extra" to :func:`digest_problems`.
SNAKEMAKE_MARKERS = frozenset({".snakemake_timestamp"})


def file_digests(root: str | os.PathLike) -> dict[str, dict]:
    """``{relative path: {"bytes", "sha256"}}`` of every file under ``root`` but the
    summary and Snakemake's markers (:data:`SNAKEMAKE_MARKERS`), sorted by path."""
    root = Path(root)
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel != SUMMARY and rel not in SNAKEMAKE_MARKERS:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            out[rel] = {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    return out


def read_manifest(root: str | os.PathLike) -> dict[str, dict]:
    """The ``files`` of ``root/export.json``; :class:`ModelFileError` if there is none."""
    summary = Path(root) / SUMMARY
    try:
        files = json.loads(summary.read_text())["files"]
    except FileNotFoundError:
        raise ModelFileError(f"{summary}: missing (the export is incomplete)") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ModelFileError(f"{summary}: no manifest of the exported files ({exc})") from exc
    return files


def stat_problems(root: str | os.PathLike) -> list[str]:
    """What is missing from an export or has another size than its manifest says."""
    root = Path(root)
    try:
        files = read_manifest(root)
    except ModelFileError as exc:
        return [str(exc)]
    problems = []
    for rel, entry in files.items():
        path = root / rel
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif path.stat().st_size != entry["bytes"]:
            size = path.stat().st_size
            problems.append(f"{path}: {size} bytes, the export wrote {entry['bytes']}")
    return problems


def digest_problems(root: str | os.PathLike) -> list[str]:
    """:func:`stat_problems`, then every file whose sha256 differs from the manifest's, and
    files the export did not write."""
    problems = stat_problems(Path(root))
    if problems:
        return problems
    recorded, found = read_manifest(root), file_digests(root)
    for rel, entry in recorded.items():
        if found[rel]["sha256"] != entry["sha256"]:
            problems.append(f"{Path(root) / rel}: its bytes differ from what the export wrote")
    extra = sorted(found.keys() - recorded.keys())
    problems += [f"{Path(root) / rel}: not written by the export" for rel in extra]
    return problems


def verify_export(root: str | os.PathLike, sample_rate: int = 16000) -> dict:
    """Check every file against the manifest, then have vosk load ``root`` and decode one
    second of low noise; :class:`ModelFileError` naming every problem, or a summary."""
    from paravg.export.verify import vosk_decode

    root = Path(root)
    problems = digest_problems(root)
    if problems:
        raise ModelFileError(f"{root}: the export is damaged:\n  " + "\n  ".join(problems))
    rng = np.random.default_rng(0)
    samples = (rng.standard_normal(sample_rate) * 30).astype("<i2")
    with tempfile.TemporaryDirectory() as tmp:
        wav_path = Path(tmp) / "noise.wav"
        with wave.open(str(wav_path), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sample_rate)
            w.writeframes(samples.tobytes())
        hyps = vosk_decode(root, {"noise": str(wav_path)}, sample_rate)
    files = len(read_manifest(root))
    return {"export": str(root), "files": files, "vosk_hypothesis": hyps["noise"]}


def check_finished_export(root: str | os.PathLike) -> None:
    """Before a run decides that an existing export needs nothing: raise
    :class:`ModelFileError` if a file of its manifest is missing or has another size, with
    the commands that rebuild it. An export of a paravg without manifests is left alone."""
    root = Path(root)
    summary = root / SUMMARY
    if not root.is_dir():
        return
    if summary.is_file():
        try:
            if "files" not in json.loads(summary.read_text()):
                return  # written before manifests existed: nothing to compare with
        except json.JSONDecodeError:
            pass  # stat_problems names it
    problems = stat_problems(root)
    if problems:
        raise ModelFileError(
            f"{root}: the export is damaged or incomplete:\n  "
            + "\n  ".join(problems)
            + f"\nRebuild it with\n  rm -r {root}\nand the same snakemake command again."
        )
