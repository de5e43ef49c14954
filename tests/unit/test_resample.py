"""paravg.resample: the band-limited resampler, sox's ``speed`` and the seeded volume gain,
checked against known answers (a sine's frequency and amplitude, the copy's length, the
filter's formula evaluated directly)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from paravg.resample import (
    ZEROS,
    resample,
    resample_kernels,
    speed_perturb,
    speed_rates,
    to_int16,
    volume_gain,
)

RATE = 16000


def sine(freq: float, seconds: float = 2.0, amplitude: float = 1000.0) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * freq * np.arange(int(seconds * RATE)) / RATE)


def peak_hz(x: np.ndarray, rate: int = RATE) -> float:
    """The frequency of the largest bin of the Hann-windowed spectrum, refined by a
    parabola through the peak's log magnitudes (accurate to a small fraction of a bin)."""
    spec = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    k = int(np.argmax(spec[1:-1])) + 1
    a, b, c = np.log(spec[k - 1 : k + 2])
    return (k + 0.5 * (a - c) / (a - 2 * b + c)) * rate / x.size


def interior(x: np.ndarray) -> np.ndarray:
    """The copy without its first and last 0.2 s (the filter's edges see zeros)."""
    return x[RATE // 5 : -RATE // 5]


@pytest.mark.parametrize("factor", [0.9, 1.1, 0.95, 1.2])
@pytest.mark.parametrize("freq", [440.0, 1234.0, 3000.0])
def test_speed_multiplies_every_frequency_by_the_factor(factor, freq):
    """sox speed f: a tone at F Hz plays at F·f Hz (pitch changes with the tempo)."""
    y = speed_perturb(sine(freq), factor, RATE)
    assert peak_hz(y) == pytest.approx(freq * factor, abs=0.5)


@pytest.mark.parametrize("factor", [0.9, 1.0, 1.1, 0.95, 1.05])
@pytest.mark.parametrize("n", [1, 159, 16000, 16001, 48123])
def test_speed_scales_the_duration_by_one_over_the_factor(factor, n):
    """N samples become ceil(N/f) at the same rate (Kaldi scales utt2dur by 1/f)."""
    y = speed_perturb(np.ones(n), factor, RATE)
    assert y.size == math.ceil(n * RATE / speed_rates(factor, RATE)[0])
    assert y.size == math.ceil(n / factor - 1e-9)


@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_a_tone_in_the_pass_band_keeps_its_amplitude(factor):
    """Up to 0.99 of the lower Nyquist the filter passes a tone within 1 %: 7 kHz at 0.9
    (6.3 kHz) and at 1.1 (7.7 kHz, the edge of the 16-kHz band)."""
    for freq in (440.0, 3000.0, 7000.0):
        y = interior(speed_perturb(sine(freq), factor, RATE))
        assert np.abs(y).max() == pytest.approx(1000.0, rel=0.01), freq


def test_what_would_fold_back_above_the_new_nyquist_is_removed():
    """At 1.1 a 7.9-kHz tone would play at 8.69 kHz, above the 8-kHz Nyquist: a
    band-limited resampler removes it (a naive interpolator folds it back to 7.31 kHz)."""
    y = interior(speed_perturb(sine(7900.0), 1.1, RATE))
    assert np.abs(y).max() < 0.01 * 1000.0


def test_the_output_is_the_windowed_sinc_sum_of_the_module_docstring():
    """y[n] = Σ_m x[m]·h(m/p − n/q), h(t) = (c/p)·sinc(c·t)·cos²(π·c·t/(2Z)) for |c·t| ≤ Z,
    evaluated directly for a few outputs of a 9 -> 10 resampling (speed 0.9)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=3000)
    p, q = 9, 10
    y = resample(x, 14400, 16000)
    c = 0.99 * min(p, q)
    m = np.arange(x.size)
    for n in (0, 1, 7, 1234, 3330):
        t = (m / p - n / q) * c
        h = np.where(
            np.abs(t) <= ZEROS, (c / p) * np.sinc(t) * np.cos(np.pi * t / (2 * ZEROS)) ** 2, 0
        )
        assert y[n] == pytest.approx(float(h @ x), abs=1e-9)


def test_kernels_are_normalised_for_a_constant_signal():
    """Each polyphase filter sums to ~1 (a constant stays constant, DC gain 1)."""
    kernels, _ = resample_kernels(11, 10)
    assert kernels.sum(axis=1) == pytest.approx(np.ones(10), abs=2e-3)


def test_equal_rates_and_factor_one_are_copies():
    x = np.arange(10.0)
    for y in (resample(x, 16000, 16000), speed_perturb(x, 1.0, RATE)):
        assert np.array_equal(y, x) and y is not x


def test_resampling_is_deterministic():
    x = np.random.default_rng(0).normal(size=20000)
    assert np.array_equal(speed_perturb(x, 1.1, RATE), speed_perturb(x, 1.1, RATE))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: resample(np.ones(3), 0, 16000), "positive"),
        (lambda: resample(np.ones((3, 2)), 8000, 16000), "1-D"),
        (lambda: speed_perturb(np.ones(3), 0.0, RATE), "> 0"),
        (lambda: volume_gain(0, 2.0, 1.0), "low <= high"),
    ],
)
def test_bad_arguments_are_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_volume_gain_is_seeded_uniform_in_kaldis_range():
    """The same seed gives the same gain (any run, process or job); gains of many seeds
    cover [0.125, 2) uniformly (mean 1.0625, Kaldi's perturb_data_dir_volume.sh range)."""
    assert volume_gain(12345) == volume_gain(12345)
    gains = np.array([volume_gain(s) for s in range(4000)])
    assert gains.min() >= 0.125 and gains.max() < 2.0
    assert gains.mean() == pytest.approx((0.125 + 2.0) / 2, abs=0.03)
    assert np.histogram(gains, bins=4, range=(0.125, 2.0))[0].min() > 900
    assert volume_gain(7, 0.5, 0.5) == 0.5


def test_to_int16_rounds_and_clips_as_sox_and_counts_the_clipped():
    pcm, clipped = to_int16(np.array([0.4, -0.6, 40000.0, -40000.0, 32767.4]))
    assert pcm.dtype == np.int16
    assert pcm.tolist() == [0, -1, 32767, -32768, 32767]
    assert clipped == 2
