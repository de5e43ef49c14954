"""Online CMN (apply-cmvn-online, OnlineCmvn::SmoothOnlineCmvnStats)."""

import numpy as np
import pytest

from paravg.errors import DataError
from paravg.ivector.cmvn import (
    OnlineCmvnOptions,
    add_utterance,
    apply_online_cmn,
    limit_frames,
    stats_of,
)


def reference(feats, global_stats, speaker_stats=None, opts=None):
    """Frame-by-frame transcription of Kaldi's smoothing, for comparison."""
    opts = opts or OnlineCmvnOptions()
    dim = feats.shape[1]
    out = np.zeros_like(feats, dtype=np.float64)
    for t in range(feats.shape[0]):
        lo = max(0, t - opts.cmn_window + 1)
        s = feats[lo : t + 1].sum(axis=0).astype(np.float64)
        c = float(t + 1 - lo)
        if c < opts.cmn_window and speaker_stats is not None:
            n = speaker_stats[0, dim]
            take = min(opts.cmn_window - c, opts.speaker_frames, n)
            if take > 0:
                s = s + speaker_stats[0, :dim] * take / n
                c += take
        if c < opts.cmn_window:
            take = min(opts.cmn_window - c, opts.global_frames)
            if take > 0:
                s = s + global_stats[0, :dim] * take / global_stats[0, dim]
                c += take
        out[t] = feats[t] - s / c
    return out


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    feats = rng.normal(3.0, 1.0, (900, 5))
    global_stats = stats_of(rng.normal(-2.0, 1.0, (5000, 5)))
    speaker = stats_of(rng.normal(1.0, 1.0, (350, 5)))
    return feats, global_stats, speaker


def test_matches_frame_by_frame_definition(data):
    feats, g, spk = data
    np.testing.assert_allclose(apply_online_cmn(feats, g), reference(feats, g), atol=1e-10)
    np.testing.assert_allclose(
        apply_online_cmn(feats, g, spk), reference(feats, g, spk), atol=1e-10
    )
    opts = OnlineCmvnOptions(cmn_window=50, speaker_frames=20, global_frames=10)
    np.testing.assert_allclose(
        apply_online_cmn(feats, g, spk, opts), reference(feats, g, spk, opts), atol=1e-10
    )


def test_first_frame_uses_global_mean_with_200_frames(data):
    feats, g, _ = data
    out = apply_online_cmn(feats[:1], g)
    mean = (feats[0] + 200 * g[0, :5] / g[0, 5]) / 201
    np.testing.assert_allclose(out[0], feats[0] - mean)


def test_long_window_is_the_plain_sliding_mean(data):
    feats, g, spk = data
    out = apply_online_cmn(feats, g, spk)
    t = 800
    np.testing.assert_allclose(out[t], feats[t] - feats[t - 599 : t + 1].mean(axis=0))


def test_speaker_stats_count_at_most_speaker_frames(data):
    feats, g, spk = data
    big = spk * 10  # 3500 frames' worth; only 600 - (t+1) of them are used
    out = apply_online_cmn(feats[:1], g, big)
    mean = (feats[0] + 599 * big[0, :5] / big[0, 5]) / 600
    np.testing.assert_allclose(out[0], feats[0] - mean)


def test_speaker_state_and_limit(data):
    feats, _, spk = data
    after = add_utterance(spk, feats)
    assert after[0, -1] == 350 + 900
    np.testing.assert_allclose(after[0, :5], spk[0, :5] + feats.sum(axis=0))
    limited = limit_frames(after, 1000)
    assert limited[0, -1] == pytest.approx(1000)
    np.testing.assert_allclose(limited[0, :5] / 1000, after[0, :5] / after[0, -1])
    assert limit_frames(spk, 1000) is spk
    assert limit_frames(None, 10) is None


def test_bad_stats_are_clear_errors(data):
    feats, g, _ = data
    with pytest.raises(DataError, match="expected \\(2, 6\\)"):
        apply_online_cmn(feats, g[:, :4])
    with pytest.raises(DataError, match="zero count"):
        apply_online_cmn(feats, np.zeros_like(g))
