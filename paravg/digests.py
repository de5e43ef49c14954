"""Per-stage digests of a finished run: where two runs of the same config part.

Rule ``digests`` writes ``results/digests.json`` and ``results/digests.md`` beside the
results table: one sha256 per stage (the corpus, each set's prepared data, features and
i-vectors, the i-vector models, the egs, each experiment's ``final.pt`` and its scores).
A stage's digest is the sha256 of the lines ``<path under results/> <sha256 of the
file>`` of its files in sorted order, each file read with the workspace's absolute path
written as ``<ws>`` (scp files and reports name it) and, in a JSON object, without the
fields that time a step or record other files' sha256. Two runs on the same corpus and
code that print the same digest for a stage computed the same bytes there; the first stage
whose digest differs is where they part (docs/reproducibility.md, "Digests", prints the
reference run's).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path

from paravg.cpu_kernels import kernels_in_effect
from paravg.io import write_json_atomic, write_text_atomic

# JSON fields that record how long a step took, not what it computed (graph.json's build
# time, scores.json's network and search seconds)
TIMING_KEYS = frozenset({"build_seconds", "timing"})
# JSON fields that record the sha256 of other files of the stage (an egs archive's
# meta.json): those files are digested themselves, so the stage's digest is what it was
# before the records existed
RECORD_KEYS = frozenset({"sha256"})


def file_digest(path: str | os.PathLike, workspace: str | os.PathLike) -> str:
    """sha256 of a file with ``workspace``'s absolute path written as ``<ws>`` and, for a
    JSON object, the timing fields and the records of other files' sha256 left out (keys
    sorted)."""
    path = Path(path)
    data = path.read_bytes()
    ws = Path(workspace)
    for prefix in {str(ws.resolve()), str(ws.absolute())}:
        data = data.replace(prefix.encode(), b"<ws>")
    if path.suffix == ".json" or path.name == "done":
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            obj = None
        if isinstance(obj, dict):
            obj = {k: v for k, v in obj.items() if k not in TIMING_KEYS | RECORD_KEYS}
            data = json.dumps(obj, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def files_under(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every file of ``paths`` (files, or directories walked), sorted, without repeats."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            found.update(f for f in p.rglob("*") if f.is_file())
        elif p.is_file():
            found.add(p)
    return sorted(found)


def stage_digest(paths: Iterable[str | os.PathLike], results: str | os.PathLike) -> dict:
    """``{"files": n, "sha256": ...}`` of the files of ``paths`` (see the module doc)."""
    results = Path(results)
    workspace = results.absolute().parent
    lines = []
    files = files_under(paths)
    for f in files:
        rel = f.absolute().relative_to(results.absolute()).as_posix()
        lines.append(f"{rel} {file_digest(f, workspace)}\n")
    return {"files": len(files), "sha256": hashlib.sha256("".join(lines).encode()).hexdigest()}


def write_digests(
    stages: Mapping[str, Iterable[str | os.PathLike]],
    results: str | os.PathLike,
    out_json: str | os.PathLike,
    out_md: str | os.PathLike,
) -> dict:
    """Digest every stage (name -> its files and directories) and write both files:
    ``{"stages": {name: digest}, "cpu_kernels": {variable: value}}``, the second the CPU
    code-path variables of this job's environment (:mod:`paravg.cpu_kernels`; every job
    of the run inherits them), since runs on two CPU types part unless they are pinned."""
    digests = {name: stage_digest(paths, results) for name, paths in stages.items()}
    kernels = kernels_in_effect(os.environ)
    write_json_atomic(out_json, {"stages": digests, "cpu_kernels": kernels})
    rows = [f"| {name} | {d['files']} | `{d['sha256'][:16]}` |" for name, d in digests.items()]
    pins = " ".join(f"{k}={shlex.quote(v) if v else '(unset)'}" for k, v in kernels.items())
    write_text_atomic(
        out_md,
        "| stage | files | sha256 (first 16 hex digits) |\n|---|---|---|\n"
        + "\n".join(rows)
        + f"\n\nCPU kernels: {pins}\n",
    )
    return digests
