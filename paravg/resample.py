"""Band-limited resampling, sox's ``speed`` effect and a seeded volume gain (numpy only).

What Kaldi's perturbation scripts run sox for, in Python:

* ``utils/data/perturb_data_dir_speed.sh`` puts ``sox -t wav - -t wav - speed <f>`` after
  each ``wav.scp`` entry. sox's ``speed f`` relabels the signal's rate as ``r·f`` and
  resamples it back to ``r``: the copy lasts ``1/f`` as long and every frequency (pitch
  and formants) is multiplied by ``f``. :func:`speed_perturb` does the same with
  :func:`resample` from ``round(r·f)`` Hz to ``r`` Hz (``N`` samples become
  ``ceil(N/f)``; the rate ``r·f`` is rounded to a whole Hz, a relative error below
  ``0.5/(r·f)``).
* ``utils/data/perturb_data_dir_volume.sh`` appends ``sox --vol <g> -t wav - -t wav - |``
  with ``g`` drawn uniformly from ``[0.125, 2]`` per recording
  (``--scale-low``/``--scale-high``); :func:`volume_gain` draws ``g`` from a generator
  seeded by ``(srand, recording id)`` (:func:`paravg.features.utterance_seed`), so the
  same recording gets the same gain in every run, job and process. sox writes 16-bit
  samples again: :func:`to_int16` rounds and clips to ``[-32768, 32767]`` (sox clips too,
  and warns).

The resampler (:func:`resample`) is Kaldi's ``LinearResample`` (``src/feat/resample.cc``;
torchaudio's ``sinc_interp_hann`` is the same filter): with both rates divided by their
gcd into ``p`` (in) and ``q`` (out), output sample ``n`` at time ``n/q`` is
``y[n] = Σ_m x[m] · h(m/p − n/q)`` with the Hann-windowed ideal low-pass

    h(t) = (c/p) · sinc(c·t) · cos²(π·c·t / (2·Z)),   |c·t| ≤ Z,   sinc(u) = sin(πu)/(πu)

where the cut-off ``c/2`` is ``rolloff · min(p, q) / 2`` (rolloff 0.99, Kaldi's
``filter_cutoff = 0.99 · 0.5 · min(rate_in, rate_out)``) and ``Z = 64`` zero crossings each
side (torchaudio's widest preset): with Kaldi's 6 the pass band droops from about 6 kHz on
at 16 kHz (a 7.7 kHz tone of a 1.1 copy keeps 59 % of its amplitude; with 64, 100 %).
It is computed as ``q`` polyphase filters (one per output phase) applied to windows of
the input taken every ``p`` samples: ``O(N · (2·Z·p/c + p))`` multiply-adds, with no
FFT over the whole signal and no dependency beyond numpy (0.3 s per minute of 16-kHz
audio and factor). A sine below the cut-off keeps its amplitude to within 1 % (checked by
tests/unit/test_resample.py); components above it are removed instead of folding back as
aliases.

Why not a library: scipy, soxr, torchaudio, resampy and libsamplerate are not installed
in paravg's environment, and this filter is about 30 lines with known maths; sox's own
``rate`` is a higher-order polyphase filter, so the copies differ from sox's in the last
bits, not in what the network learns from (Kaldi re-aligns every copy in any case).
"""

from __future__ import annotations

import math

import numpy as np

#: Zero crossings of the windowed sinc each side (Kaldi's ``num_zeros``).
ZEROS = 64
#: Fraction of the lower Nyquist kept (Kaldi's ``0.99 * 0.5 * min(rates)``).
ROLLOFF = 0.99
INT16_MIN, INT16_MAX = -32768, 32767


def resample_kernels(p: int, q: int, zeros: int = ZEROS, rolloff: float = ROLLOFF):
    """The ``q`` polyphase filters of a ``p`` -> ``q`` resampler (rates already divided
    by their gcd) and the half-width ``w``: row ``i`` holds ``h(m/p − i/q)`` for the input
    offsets ``m = −w .. w+p−1`` around output phase ``i`` (module docstring)."""
    cutoff = min(p, q) * rolloff
    width = math.ceil(zeros * p / cutoff)
    offsets = np.arange(-width, width + p, dtype=np.float64) / p
    t = (offsets[None, :] - np.arange(q, dtype=np.float64)[:, None] / q) * cutoff
    t = np.clip(t, -zeros, zeros)
    window = np.cos(t * math.pi / zeros / 2) ** 2
    return (cutoff / p) * np.sinc(t) * window, width


def resample(x: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """``x`` (1-D) sampled at ``rate_in`` Hz, band-limited and resampled to ``rate_out``
    Hz: ``ceil(len(x) · rate_out / rate_in)`` samples, float64. The signal is taken as
    zero outside ``x`` (Kaldi's ``LinearResample`` with ``flush``)."""
    if rate_in <= 0 or rate_out <= 0:
        raise ValueError(f"sample rates must be positive, got {rate_in} and {rate_out}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D signal, got shape {x.shape}")
    g = math.gcd(int(rate_in), int(rate_out))
    p, q = int(rate_in) // g, int(rate_out) // g
    if p == q:
        return x.copy()
    n_out = -(-x.size * q // p)  # ceil
    if n_out == 0:
        return np.zeros(0)
    kernels, width = resample_kernels(p, q)
    num_blocks = -(-n_out // q)  # blocks of q outputs, each from input starting at k·p
    taps = kernels.shape[1]  # 2·width + p
    padded = np.zeros(width + num_blocks * p + taps)
    padded[width : width + x.size] = x
    windows = np.lib.stride_tricks.sliding_window_view(padded, taps)[::p][:num_blocks]
    return (windows @ kernels.T).reshape(-1)[:n_out]


def speed_rates(factor: float, sample_rate: int) -> tuple[int, int]:
    """The rates sox's ``speed factor`` resamples between: ``round(r·factor)`` Hz (the
    relabelled input) to ``r`` Hz."""
    if not factor > 0:
        raise ValueError(f"speed factor must be > 0, got {factor}")
    return round(sample_rate * factor), int(sample_rate)


def speed_perturb(x: np.ndarray, factor: float, sample_rate: int) -> np.ndarray:
    """sox's ``speed factor``: ``x`` played ``factor`` times faster at the same rate
    (duration × 1/factor, every frequency × factor). ``factor == 1`` returns a float64
    copy."""
    if factor == 1:
        return np.asarray(x, dtype=np.float64).copy()
    rate_in, rate_out = speed_rates(factor, sample_rate)
    return resample(x, rate_in, rate_out)


def volume_gain(seed: int, low: float = 0.125, high: float = 2.0) -> float:
    """A gain uniform in ``[low, high)`` from numpy's PCG64 seeded with ``seed`` (Kaldi's
    ``perturb_data_dir_volume.sh`` draws it per recording from ``[0.125, 2]``)."""
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got {low} and {high}")
    return float(np.random.default_rng(seed).uniform(low, high))


def to_int16(x: np.ndarray) -> tuple[np.ndarray, int]:
    """Samples at int16 scale rounded to int16, clipped to its range as sox clips; and
    the number of samples that were clipped."""
    r = np.rint(np.asarray(x, dtype=np.float64))
    clipped = int(np.count_nonzero((r < INT16_MIN) | (r > INT16_MAX)))
    return np.clip(r, INT16_MIN, INT16_MAX).astype(np.int16), clipped
