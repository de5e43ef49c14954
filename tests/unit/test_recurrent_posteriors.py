"""Evaluation and decoding of a recurrent model on whole utterances (looped-equivalent):
the recurrence runs from the utterance's first frame, the i-vector of each input time is
its online row (Kaldi's looped Round(ivector, chunk) with the chunk = the period)."""

import numpy as np
import torch

from paravg.decode.posteriors import utterance_log_posteriors
from tests.unit.dummies import (
    FEAT,
    IVEC,
    TARGETS,
    lstm_layer,
    seeded,
    tdnn_layer,
    tdnn_lstm_config,
    with_output,
)

PERIOD = 10
CFG = tdnn_lstm_config(tdnn_layer(splice=[-1, 0, 1]), lstm_layer(), self_repair_scale=1e-5)


def scored_model():
    return with_output(seeded(CFG, 0), 0).eval()


def inputs(T=37, seed=0):
    rng = np.random.default_rng(seed)
    feats = rng.standard_normal((T, FEAT)).astype(np.float32)
    ivecs = rng.standard_normal((-(-T // PERIOD), IVEC)).astype(np.float32)
    return feats, ivecs


@torch.no_grad()
def test_one_window_with_the_online_row_of_each_input_time():
    m = scored_model()
    feats, ivecs = inputs()
    T, (left, right) = len(feats), (m.left_context, m.right_context)
    got = utterance_log_posteriors(m, feats, ivecs, PERIOD)
    assert got.shape == (T, TARGETS)
    # by hand: input time t (padded: −left … T + right − 1) takes feats[clamp(t)] and
    # online row clamp(⌊t / period⌋)
    times = range(-left, T + right)
    x = torch.tensor(np.stack([feats[min(max(t, 0), T - 1)] for t in times]))
    iv = torch.tensor(np.stack([ivecs[min(max(t // PERIOD, 0), len(ivecs) - 1)] for t in times]))
    assert torch.allclose(got, m(x[None], iv[None])[0])


@torch.no_grad()
def test_the_recurrence_runs_from_the_utterance_start():
    """Frame 0 reaches output 30 through the LSTM's state (30 frames past any period
    chunk's window): the whole utterance is one computation; a later i-vector row does
    not reach back."""
    m = scored_model()
    feats, ivecs = inputs()
    base = utterance_log_posteriors(m, feats, ivecs, PERIOD)
    moved = feats.copy()
    moved[0] += 1.0
    assert not torch.allclose(utterance_log_posteriors(m, moved, ivecs, PERIOD)[30], base[30])
    later = ivecs.copy()
    later[3] += 1.0  # LDA rows at times 30 …: output t reads LDA rows up to
    out = utterance_log_posteriors(m, feats, later, PERIOD)  # t + right − max(splice)
    edge = 30 - (m.right_context - max(CFG["input_splice"]))
    assert torch.equal(out[:edge], base[:edge]) and not torch.allclose(out[edge], base[edge])
