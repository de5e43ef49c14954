"""The TDNN-LSTM family through the same DAG, on chunk egs (Kaldi's train_rnn.py):
the egs rebuilt as chunks, trained with whole chunks and derivative truncation,
combined, evaluated and decoded on whole utterances (looped-equivalent), exported to
Kaldi's formats; a rerun job reproduces its bits.

The chunk egs replace the frame egs of the shared upstream workspace (the egs config
changes), so every experiment of the run is recurrent: the overlay makes the default
experiment the tiny TDNN-LSTM (input splice ±1, tdnn 32, tdnn 32 ±1, one LSTM of 16
cells with delay −3, output delay 1: context (2, 3)).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from .conftest import WARM, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline

LSTM_MODEL = {
    "family": "tdnn_lstm",
    "input_splice": [-1, 0, 1],
    "tdnn_lstm": {
        "output_delay": 1,
        "layers": [
            {"type": "tdnn", "dim": 32},
            {"type": "tdnn", "dim": 32, "splice": [-1, 0, 1]},
            {
                "type": "lstm",
                "cell_dim": 16,
                "recurrent_projection_dim": 4,
                "delay": -3,
                "decay_time": 20,
            },
        ],
    },
}
SHRINK_THRESHOLD = 0.1
OVERLAY = {
    "model": LSTM_MODEL,
    "egs": {
        "chunk_width": "20,10",
        "chunk_left_context": 10,
        "chunk_left_context_initial": 0,
        "chunk_right_context_final": 0,
    },
    # 3 archives of ~200 chunks (samples_per_iter 300 chunks of the principal width):
    # 4 epochs are 12 archives, 8 iterations of 1 → 2 jobs; train_rnn.py's shrinkage
    "trainer": {
        "num_epochs": 4,
        "num_chunk_per_minibatch": "16,8",
        "deriv_truncate_margin": 4,
        "shrink_value": 0.99,
        "shrink_saturation_threshold": SHRINK_THRESHOLD,
    },
}
EXP = Path("results/exp/default")


@pytest.fixture(scope="module")
def workdir(clone_upstream) -> Path:
    ws = clone_upstream("lstm")
    # the chunk egs replace the clone's frame egs: the DAG does not plan from their
    # info.json (paravg.dag.Dag.stale_egs) but after the egs checkpoint, which reruns
    targets = [str(EXP / t) for t in ("decode/test/scores.json", "eval/test.json", "kaldi")]
    proc = run_snakemake(ws, "--cores", "2", *WARM, *targets, overlay=OVERLAY)
    check_ok(proc, "the lstm run")
    assert "was made with other egs options than the config's" in proc.stdout
    return ws


def test_the_egs_are_chunks_with_the_train_rnn_contexts(workdir):
    info = json.loads((workdir / "results/egs/info.json").read_text())
    assert info["chunk_widths"] == [20, 10] and info["frames_per_eg"] == 20
    # chunk contexts + the model's (2, 3); the first / last chunk: the model's only
    assert (info["left_context"], info["right_context"]) == (12, 3)
    assert (info["left_context_initial"], info["right_context_final"]) == (2, 3)
    chunks = np.load(workdir / "results/egs/egs.0.chunks.npy")
    assert set(chunks[:, 0].tolist()) <= {20, 10} and set(chunks[:, 1].tolist()) == {2, 12}


def test_the_lstm_trains_on_chunks_combines_evaluates_and_decodes(workdir):
    exp = workdir / EXP
    final = torch.load(exp / "final.pt", weights_only=True)
    assert final["model"]["family"] == "tdnn_lstm"
    diags = sorted((exp / "diag").glob("*.json"), key=lambda p: int(p.stem))
    first, last = (json.loads(p.read_text()) for p in (diags[0], diags[-1]))
    assert last["valid"]["logprob"] > first["valid"]["logprob"] + 0.3, (first, last)
    job = json.loads(next((exp / "1").glob("job*.json")).read_text())
    params = job["plan"]["params"]
    assert params["chunk_training"] and params["deriv_truncate_margin"] == 4
    assert params["minibatch_size"] == "16,8" and params["momentum"] == 0.5
    evaluated = json.loads((exp / "eval" / "test.json").read_text())
    assert evaluated["frame_accuracy"] > 0.2, evaluated
    scores = json.loads((exp / "decode" / "test" / "scores.json").read_text())
    assert scores, scores
    assert (exp / "kaldi" / "export.json").exists()  # the chunk-trained model exports


def test_jobs_shrink_on_the_saturation_their_synced_start_carries(workdir):
    """train_rnn.py's shrinkage through the DAG: iteration 0 shrinks unseen; later jobs
    decide on the statistics of the synced model they start from, which the averaging
    carries from the jobs before (the saturation get_saturation.pl would print)."""
    from paravg.nnet.model_file import build_model

    exp = workdir / EXP
    for stats_file in sorted(exp.glob("*/job*.json")):
        stats = json.loads(stats_file.read_text())
        shrink, t = stats["shrink"], stats["iteration"]
        if t == 0:
            assert shrink == {"value": 0.99, "saturation": None}, stats_file
            continue
        start = build_model(torch.load(exp / f"{t}.pt", weights_only=True))
        assert shrink["saturation"] == pytest.approx(start.saturation()), stats_file
        assert 0.0 < shrink["saturation"] < 1.0, stats_file
        assert shrink["value"] == (0.99 if shrink["saturation"] > SHRINK_THRESHOLD else 1.0)


def test_a_rerun_lstm_iteration_reproduces_its_bits(workdir):
    exp = workdir / EXP
    files = [exp / "3.pt", *sorted((exp / "3").glob("job*.pt"))]
    assert len(files) >= 2
    before = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    for f in [*files, *(exp / "3").glob("job*.json")]:
        f.unlink()
    proc = run_snakemake(workdir, "--cores", "2", str(EXP / "3.pt"), overlay=OVERLAY)
    check_ok(proc, "rebuilding one lstm iteration")
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files} == before
