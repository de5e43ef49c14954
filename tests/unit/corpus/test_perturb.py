"""Speed perturbation, noise and level (paravg.corpus.perturb, paravg.corpus.resample)."""

import numpy as np
import pytest

from paravg.corpus.labels import Segment, frame_labels
from paravg.corpus.perturb import (
    add_noise,
    set_peak_level,
    speed_perturb,
    speed_rate,
    to_int16,
)
from paravg.corpus.resample import resample

SR = 16000


def _burst(num_samples, start, stop, freq=500.0):
    x = np.zeros(num_samples)
    t = np.arange(stop - start) / SR
    x[start:stop] = np.sin(2 * np.pi * freq * t)
    return x


def _onset(x, threshold=0.3):
    return int(np.argmax(np.abs(x) > threshold))


@pytest.mark.parametrize("factor", [1.08, 0.93, 1.12, 0.88])
def test_speed_perturb_rescales_segments_exactly(factor):
    x = _burst(32000, 8000, 16000)
    segments = [Segment("sil", 0.0, 0.5), Segment("aa", 0.5, 1.0), Segment("sil", 1.0, 2.0)]
    y, scaled = speed_perturb(x, segments, factor)
    assert len(y) == (32000 * SR) // speed_rate(factor)
    for old, new in zip(segments, scaled, strict=True):
        assert new.phone == old.phone
        assert new.start == pytest.approx(old.start / factor, abs=1e-12)
        assert new.end == pytest.approx(old.end / factor, abs=1e-12)
    # the sound moves with its label: the onset at sample n moves to n / a
    assert abs(_onset(y) - _onset(x) / factor) <= 1.0
    # and its pitch scales by a: zero crossings per second x a
    seg = y[round(0.55 / factor * SR) : round(0.95 / factor * SR)]
    crossings = np.count_nonzero(np.diff(np.signbit(seg))) / (len(seg) / SR) / 2
    assert crossings == pytest.approx(500.0 * factor, rel=0.01)
    # frame labels follow the rescaled segments
    labels = frame_labels(scaled, len(y))
    first_aa = int(np.argmax(labels != 0))
    assert abs(0.010 * first_aa + 0.0125 - 0.5 / factor) <= 0.010


def test_speed_factor_one_is_identity():
    x = np.random.default_rng(0).standard_normal(1000)
    y, segs = speed_perturb(x, [Segment("sil", 0.0, 1000 / SR)], 1.0)
    assert np.array_equal(x, y) and segs == [Segment("sil", 0.0, 1000 / SR)]


def test_resample_keeps_a_tone():
    x = np.sin(2 * np.pi * 440 * np.arange(32000) / 32000)
    y = resample(x, 32000, SR)
    assert len(y) == 16000
    ref = np.sin(2 * np.pi * 440 * np.arange(16000) / SR)
    assert np.abs(y[200:-200] - ref[200:-200]).max() < 1e-3


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_noise_snr_and_level(beta):
    rng = np.random.default_rng(1)
    speech = _burst(16000, 2000, 14000)
    noisy = add_noise(speech, 25.0, beta, rng)
    noise = noisy - speech
    snr = 10 * np.log10(np.mean(speech**2) / np.mean(noise**2))
    assert snr == pytest.approx(25.0, abs=1e-6)
    assert np.count_nonzero(noisy == 0.0) == 0
    level = set_peak_level(noisy, -6.0)
    assert 20 * np.log10(np.abs(level).max()) == pytest.approx(-6.0)
    pcm = to_int16(level)
    assert pcm.dtype == np.int16 and np.abs(pcm).max() < 32767


def test_noise_is_seeded():
    x = np.ones(500)
    a = add_noise(x, 30.0, 1.0, np.random.default_rng(5))
    b = add_noise(x, 30.0, 1.0, np.random.default_rng(5))
    assert np.array_equal(a, b)
