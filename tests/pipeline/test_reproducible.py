"""Reproducibility: two fresh builds of the tiny pipeline give identical files.

The shared ``upstream`` and ``trained`` workspaces (2 cores, the default thread settings)
are compared with a second build from nothing made with 1 core (every rule then runs with
``torch.set_num_threads(1)`` and the demo corpus with one worker process) and
``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` = 1: the demo corpus
(wavs and its data dirs), the prepared data dirs, features, i-vectors and egs must be
byte-identical, and so must the default experiment's ``final.pt`` and its evaluation. The corpus
includes espeak-ng voices when libespeak-ng is installed (the engine whose noise was
once unseeded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from paravg.digests import file_digest

from .conftest import UPSTREAM_TARGETS, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
UPSTREAM_PARTS = ("demo", "data", "feats", "ivector", "egs")


def checksums(ws: Path, parts: tuple[str, ...] = UPSTREAM_PARTS) -> dict[str, str]:
    """{path under results/: sha256} of every file of ``parts``."""
    root = ws / "results"
    out = {}
    for part in parts:
        for path in sorted((root / part).rglob("*")):
            if path.is_file():
                out[str(path.relative_to(root))] = file_digest(path, ws)
    return out


@pytest.fixture(scope="module")
def second_build(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("second_build")
    proc = run_snakemake(ws, "--cores", "1", *UPSTREAM_TARGETS, env=SINGLE_THREAD)
    check_ok(proc, "the second fresh build (1 core, 1 thread)")
    return ws


def test_upstream_files_identical_across_fresh_builds_and_thread_counts(second_build, upstream):
    first, second = checksums(upstream), checksums(second_build)
    assert first.keys() == second.keys()
    differ = sorted(k for k in first if first[k] != second[k])
    assert not differ, f"{len(differ)} of {len(first)} files differ: {differ[:20]}"
    assert any(k.startswith("demo/wav/") for k in first)
    assert any(k.startswith("egs/") and k.endswith(".feats.npy") for k in first)


def test_final_model_identical_across_fresh_builds_and_thread_counts(second_build, trained):
    path = Path("results/exp/default/final.pt")
    evaluation = Path("results/exp/default/eval/test.json")
    proc = run_snakemake(
        second_build, "--cores", "1", str(path), str(evaluation), env=SINGLE_THREAD
    )
    check_ok(proc, "training in the second build")
    fa = torch.load(trained / path, weights_only=True)
    fb = torch.load(second_build / path, weights_only=True)
    assert fa["meta"] == fb["meta"] and fa["state_dict"].keys() == fb["state_dict"].keys()
    for name, tensor in fa["state_dict"].items():
        assert torch.equal(tensor, fb["state_dict"][name]), name
    ja = json.loads((trained / evaluation).read_text())
    jb = json.loads((second_build / evaluation).read_text())
    assert ja == jb
