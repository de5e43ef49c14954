"""Band-limited resampling between integer sample rates (mirrors Kaldi's feat/resample.cc).

Kaldi's ``LinearResample``: output sample ``i`` sits at time ``t_i = i / f_out`` and is

    y[i] = sum_j  w(t_i - j / f_in) * x[j] / f_in

with the Hann-windowed sinc low-pass filter (cut-off ``c``, ``Z`` zero crossings each side)

    w(t) = 0.5 (1 + cos(2 pi c t / Z)) * sin(2 pi c t) / (pi t)     for |t| < Z / (2c)

(``2c`` at ``t = 0``, zero outside). ``c = 0.99 * min(f_in, f_out) / 2`` removes what the
lower rate cannot carry. Because both rates are integers, the filter phases repeat every
``f_out / gcd(f_in, f_out)`` output samples; the weights of one period are computed once
from exact integer time differences. The output has ``floor(n * f_out / f_in)`` samples,
``x`` is taken as zero outside ``[0, n)``.
"""

from __future__ import annotations

import math

import numpy as np


def _filter_weights(
    in_rate: int, out_rate: int, num_zeros: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(first input index per phase, weights [phases x taps], phases, input step)."""
    g = math.gcd(in_rate, out_rate)
    phases, step = out_rate // g, in_rate // g
    cutoff = 0.99 * 0.5 * min(in_rate, out_rate)
    half_width = num_zeros / (2.0 * cutoff)  # seconds
    p = np.arange(phases)
    # input samples j with |p/out - j/in| < half_width
    first = np.ceil((p / out_rate - half_width) * in_rate).astype(np.int64)
    last = np.floor((p / out_rate + half_width) * in_rate).astype(np.int64)
    taps = int((last - first).max()) + 1
    j = first[:, None] + np.arange(taps)[None, :]
    # t = p/out - j/in, from integers: (p*in - j*out) / (in*out)
    t = (p[:, None] * in_rate - j * out_rate) / (in_rate * out_rate)
    inside = (np.abs(t) < half_width) & (j <= last[:, None])
    window = 0.5 * (1.0 + np.cos(2.0 * np.pi * cutoff / num_zeros * t))
    with np.errstate(invalid="ignore", divide="ignore"):
        sinc = np.where(t == 0.0, 2.0 * cutoff, np.sin(2.0 * np.pi * cutoff * t) / (np.pi * t))
    weights = np.where(inside, window * sinc / in_rate, 0.0)
    return first, weights, phases, step


def resample(samples: np.ndarray, in_rate: int, out_rate: int, num_zeros: int = 8) -> np.ndarray:
    """Resample a 1-D signal from ``in_rate`` to ``out_rate`` Hz (both integers)."""
    if in_rate <= 0 or out_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {in_rate} -> {out_rate}")
    x = np.asarray(samples, dtype=np.float64)
    if in_rate == out_rate:
        return x.copy()
    first, weights, phases, step = _filter_weights(in_rate, out_rate, num_zeros)
    num_out = (len(x) * out_rate) // in_rate
    taps = weights.shape[1]
    pad = taps + int(np.abs(first).max()) + 1
    padded = np.concatenate([np.zeros(pad), x, np.zeros(pad + step + taps)])
    i = np.arange(num_out)
    unit, phase = np.divmod(i, phases)
    start = unit * step + first[phase] + pad
    out = np.zeros(num_out)
    for k in range(taps):
        out += weights[phase, k] * padded[start + k]
    return out
