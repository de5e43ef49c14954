"""GMM features: add-deltas (order 2, window 2) against Kaldi's formula worked by hand, and
per-speaker CMVN (apply-cmvn with compute-cmvn-stats --spk2utt)."""

from __future__ import annotations

import numpy as np
import pytest

from paravg.gmm.deltas import add_deltas, apply_cmvn, delta_scales, gmm_features, speaker_cmvn_stats


def test_delta_filters_are_kaldis():
    first, second = delta_scales()[1:]
    np.testing.assert_allclose(first, [-0.2, -0.1, 0.0, 0.1, 0.2])
    np.testing.assert_allclose(second, np.array([4, 4, 1, -4, -10, -4, 1, 4, 4]) / 100.0)


def test_add_deltas_by_hand():
    # one dimension, frames 0 1 4 9 16 (x_t = t^2); edge frames repeat
    x = np.array([[0.0], [1.0], [4.0], [9.0], [16.0]])
    out = add_deltas(x)
    assert out.shape == (5, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out[:, 0], x[:, 0])
    # delta at t=2: (-2*0 - 1*1 + 1*9 + 2*16) / 10 = 4.0
    assert out[2, 1] == pytest.approx(4.0)
    # delta at t=0: frames clamped to (0, 0, 0, 1, 4): (-2*0 - 0 + 1 + 8) / 10 = 0.9
    assert out[0, 1] == pytest.approx(0.9)
    # delta-delta at t=2: taps over frames clamped to (0,0,0,1,4,9,16,16,16)
    taps = np.array([4, 4, 1, -4, -10, -4, 1, 4, 4]) / 100.0
    frames = np.array([0, 0, 0, 1, 4, 9, 16, 16, 16], float)
    assert out[2, 2] == pytest.approx(float(taps @ frames))
    # a linear ramp far from the edges has delta = slope and delta-delta = 0
    ramp = add_deltas(np.arange(20, dtype=float)[:, None] * 3.0)
    np.testing.assert_allclose(ramp[5:15, 1], 3.0, rtol=1e-6)
    np.testing.assert_allclose(ramp[5:15, 2], 0.0, atol=1e-5)


def test_add_deltas_13_to_39_and_one_frame():
    rng = np.random.default_rng(0)
    assert add_deltas(rng.normal(size=(7, 13))).shape == (7, 39)
    one = add_deltas(np.ones((1, 13)))
    np.testing.assert_allclose(one[0, 13:], 0.0, atol=1e-7)  # a constant has no deltas


def test_cmvn_is_per_speaker():
    rng = np.random.default_rng(1)
    feats = {
        "a1": rng.normal(3.0, 2.0, size=(50, 4)),
        "a2": rng.normal(3.0, 2.0, size=(30, 4)),
        "b1": rng.normal(-5.0, 0.5, size=(40, 4)),
    }
    utt2spk = {"a1": "A", "a2": "A", "b1": "B"}
    stats = speaker_cmvn_stats(feats, utt2spk)
    assert stats["A"][0, -1] == 80 and stats["B"][0, -1] == 40
    both_a = np.concatenate([feats["a1"], feats["a2"]])
    np.testing.assert_allclose(stats["A"][0, :-1], both_a.sum(0))
    # mean normalisation: the speaker's frames (not each utterance's) have mean zero
    a_norm = np.concatenate([apply_cmvn(feats[u], stats["A"]) for u in ("a1", "a2")])
    np.testing.assert_allclose(a_norm.mean(0), 0.0, atol=1e-5)
    assert abs(apply_cmvn(feats["a1"], stats["A"]).mean(0)).max() > 1e-3
    # variance normalisation: unit variance per speaker
    b_norm = apply_cmvn(feats["b1"], stats["B"], norm_vars=True)
    np.testing.assert_allclose(b_norm.var(0), 1.0, rtol=1e-4)
    # the GMM feature pipeline: CMVN then deltas, 12 dims
    out = gmm_features(feats, utt2spk)
    assert out["b1"].shape == (40, 12)
    np.testing.assert_allclose(out["b1"][:, :4], feats["b1"] - feats["b1"].mean(0), atol=1e-5)
