"""Speaker and recording variation applied to synthesized speech.

* :func:`speed_perturb` - Kaldi's speed perturbation (``sox speed a``, as in
  utils/data/perturb_data_dir_speed.sh): the signal sampled at ``f`` is read as if it had
  been recorded at ``f * a`` and resampled back to ``f``. Pitch and formants scale by
  ``a``, durations by ``1 / a``; a sound at time ``t`` moves to exactly ``t / a``, so
  phone segment times are rescaled exactly by ``1 / a``.
* :func:`coloured_noise` - Gaussian noise with power spectrum ``~ 1 / f^beta``
  (``beta = 0`` white, 1 pink, 2 brown), unit mean power.
* :func:`add_noise` - noise mixed at a given SNR: ``10 log10(P_speech / P_noise) = snr``,
  powers as mean squares over the whole utterance (so no sample is digital zero).
* :func:`set_peak_level` - scale to a peak of ``level`` dBFS (``20 log10 max|x| = level``
  with full scale 1.0); the level is below 0 dBFS, so int16 never clips.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from paravg.corpus.labels import SAMPLE_RATE, Segment, scale_segments
from paravg.corpus.resample import resample


def speed_rate(factor: float, sample_rate: int = SAMPLE_RATE) -> int:
    """The integer rate ``round(f * a)`` a speed factor reads the signal at."""
    rate = round(sample_rate * factor)
    if rate <= 0 or abs(rate - sample_rate * factor) > 1e-6 * sample_rate:
        raise ValueError(f"speed factor {factor} gives no integer rate at {sample_rate} Hz")
    return rate


def speed_perturb(
    samples: np.ndarray,
    segments: Sequence[Segment],
    factor: float,
    sample_rate: int = SAMPLE_RATE,
) -> tuple[np.ndarray, list[Segment]]:
    """Speed-perturb by ``factor`` (> 1 faster/higher): samples and segments / factor.

    The effective factor is ``speed_rate(factor) / sample_rate`` (the factor itself for
    any factor with at most 4 decimals at 16 kHz); segment times are divided by it.
    """
    if factor == 1.0:
        return np.asarray(samples, dtype=np.float64).copy(), list(segments)
    rate = speed_rate(factor, sample_rate)
    out = resample(samples, rate, sample_rate)
    return out, scale_segments(segments, sample_rate / rate)


def coloured_noise(num_samples: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-power Gaussian noise with a ``1 / f^beta`` power spectrum (DC removed)."""
    white = rng.standard_normal(num_samples)
    if num_samples < 2:
        return white
    spectrum = np.fft.rfft(white)
    freqs = np.arange(len(spectrum), dtype=np.float64)
    freqs[0] = 1.0
    spectrum *= freqs ** (-beta / 2.0)
    spectrum[0] = 0.0
    noise = np.fft.irfft(spectrum, n=num_samples)
    power = float(np.mean(noise**2))
    return noise / np.sqrt(power) if power > 0 else noise


def add_noise(
    samples: np.ndarray, snr_db: float, beta: float, rng: np.random.Generator
) -> np.ndarray:
    """``samples`` plus coloured noise at ``snr_db`` dB below the signal's mean power."""
    x = np.asarray(samples, dtype=np.float64)
    power = float(np.mean(x**2)) if len(x) else 0.0
    noise = coloured_noise(len(x), beta, rng)
    return x + noise * np.sqrt(power / 10.0 ** (snr_db / 10.0))


def set_peak_level(samples: np.ndarray, level_dbfs: float) -> np.ndarray:
    """Scale so that the peak magnitude is ``10^(level/20)`` of full scale."""
    if level_dbfs > 0:
        raise ValueError(f"peak level must be <= 0 dBFS, got {level_dbfs}")
    x = np.asarray(samples, dtype=np.float64)
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak == 0.0:
        return x.copy()
    return x * (10.0 ** (level_dbfs / 20.0) / peak)


def to_int16(samples: np.ndarray) -> np.ndarray:
    """Float samples in [-1, 1] to 16-bit PCM (rounded, clipped)."""
    return np.clip(np.rint(np.asarray(samples) * 32767.0), -32768, 32767).astype(np.int16)
