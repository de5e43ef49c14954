"""The TDNN-F family through the same DAG as the TDNN: trained, combined (batch-norm
statistics recomputed on the combine egs), evaluated, decoded, exported to nnet3 and
decoded by vosk like paravg's own decoder; a rerun job reproduces its bits.

The tiny TDNN-F (input splice ±1, strides 1, 0, 1) needs 3 frames of context on each
side, the tiny TDNN's own: the shared upstream egs serve it unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from .conftest import TINY_TDNNF, WARM, check_ok, run_snakemake
from .vosk_checks import (
    assert_agreement,
    assert_hypotheses_are_words,
    decode_both,
    export_dither0,
    record_agreement,
    without_ivector_input,
)

pytestmark = pytest.mark.pipeline

TDNNF = {
    "model": TINY_TDNNF,
    "trainer": {"dropout_schedule": "0,0@0.20,0.5@0.50,0"},
}
OVERLAY = {"experiments": {"tdnnf": TDNNF}}
EXP = Path("results/exp/tdnnf")


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("tdnnf")
    targets = [str(EXP / "kaldi"), str(EXP / "decode/test/scores.json"), str(EXP / "final.json")]
    check_ok(run_snakemake(ws, "--cores", "2", *WARM, *targets, overlay=OVERLAY), "the tdnnf run")
    return ws


def test_the_tdnnf_trains_combines_and_decodes_through_the_dag(workdir):
    exp = workdir / EXP
    final = torch.load(exp / "final.pt", weights_only=True)
    assert final["model"]["family"] == "tdnnf"
    first, last = (json.loads((exp / "diag" / f"{i}.json").read_text()) for i in (0, 12))
    assert last["valid"]["logprob"] > first["valid"]["logprob"] + 0.3, (first, last)
    assert set(last["progress"]) >= {"tdnnf2.linear", "prefinal-l", "output.affine"}
    # every batch-norm of the final model carries the combine egs' statistics: whole rows
    # (no job's 0.8-scaled sums), the same count at tdnn1 as the rows it saw there
    counts = [float(v) for k, v in final["state_dict"].items() if k.endswith("stats_count")]
    assert counts and all(c == int(c) and c > 0 for c in counts), counts
    scores = json.loads((exp / "decode" / "test" / "scores.json").read_text())
    assert scores, scores


def test_vosk_decodes_the_tdnnf_export_like_paravgs_decoder(workdir):
    """As the TDNN's test 1 (tests/pipeline/test_vosk.py): the trained TDNN-F without its
    i-vector input, exported with dither 0, decoded by vosk and by Kaldi's FasterDecoder
    on paravg's log-likelihoods with vosk's graph scale."""
    model = without_ivector_input(workdir, workdir / EXP / "final.pt")
    kaldi = workdir / "kaldi_no_ivector_input"
    export_dither0(workdir, model, kaldi)
    ours, vosk = decode_both(workdir, kaldi, model, True)
    stats = record_agreement(workdir, "tdnnf_no_ivector_input", ours, vosk)
    assert_agreement(stats)
    assert_hypotheses_are_words(workdir, vosk)


def test_a_rerun_tdnnf_iteration_reproduces_its_bits(workdir):
    """A middle iteration (dropout on; every constraint draw, batch-norm update and
    dropout mask in it) rebuilt from its inputs writes the same bytes: its jobs' models
    and the averaged model."""
    exp = workdir / EXP
    files = [exp / "8.pt", *sorted((exp / "8").glob("job*.pt"))]
    assert len(files) >= 2
    before = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    for f in [*files, *(exp / "8").glob("job*.json")]:
        f.unlink()
    proc = run_snakemake(workdir, "--cores", "2", str(EXP / "8.pt"), overlay=OVERLAY)
    check_ok(proc, "rebuilding one tdnnf iteration")
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files} == before
