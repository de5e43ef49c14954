"""No run that ends 0 mixes two configs (issue 23, B1).

On a finished run decoding two eval sets, the decode beam changes while one set's data
edit is pending. Snakemake then plans only the edited set's jobs: it skips the params
check of a job below a checkpoint while a job upstream of it is pending, so the other set
keeps its old decode. The results table sees it (every scores.json records the search
options its splits used) and stops naming it; the same command, run again, decodes that
set anew and the table comes out with one config.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

TWO_SETS = {"experiments": {"default": {}}, "eval_sets": ["test", "train"]}
TABLE = "results/results.md"


def decode_beam(ws: Path, set_: str) -> float:
    scores = ws / "results" / "exp" / "default" / "decode" / set_ / "scores.json"
    return json.loads(scores.read_text())["decode_options"]["beam"]


def test_a_config_change_with_another_sets_edit_pending_never_ends_0_mixed(clone_trained):
    ws = clone_trained("mixing")
    check_ok(
        run_snakemake(ws, "--cores", "2", *WARM, TABLE, overlay=TWO_SETS), "decoding both sets"
    )
    assert decode_beam(ws, "test") == decode_beam(ws, "train") == 15.0

    wav_scp = ws / "results" / "demo" / "test" / "wav.scp"  # the test set's source
    lines = wav_scp.read_text().splitlines()
    wav_scp.write_text("\n".join([lines[0] + " ", *lines[1:]]) + "\n")
    beam_14 = {**TWO_SETS, "decode": {"beam": 14.0}}
    proc = run_snakemake(ws, "--cores", "2", *WARM, TABLE, overlay=beam_14)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "the results would mix two configs" in proc.stdout, proc.stdout[-3000:]
    log = (ws / "logs" / "results_table" / "all.log").read_text()
    assert "decode/train/scores.json: decoded with beam 15.0 (config: 14.0)" in log, log

    check_ok(
        run_snakemake(ws, "--cores", "2", *WARM, TABLE, overlay=beam_14), "the same command again"
    )
    assert decode_beam(ws, "test") == decode_beam(ws, "train") == 14.0
