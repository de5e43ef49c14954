"""GMM features: per-speaker CMVN then delta and delta-delta features, as ``train_mono.sh``.

The feature pipeline of ``steps/train_mono.sh``, ``train_deltas.sh`` and ``align_si.sh``::

    apply-cmvn --utt2spk=ark:utt2spk scp:cmvn.scp scp:feats.scp ark:- | add-deltas ark:- ark:-

**CMVN** (``src/featbin/apply-cmvn.cc``, ``transform/cmvn.cc: ApplyCmvn``). A speaker's
statistics are ``2 x (D+1)``: row 0 ``(Σ_t x_t, T)``, row 1 ``(Σ_t x_t², 0)`` over all
its utterances (``compute-cmvn-stats --spk2utt``, :func:`paravg.features.cmvn_stats`).
With ``m = Σx / T`` and, for ``--norm-vars=true``, ``v = Σx²/T - m²`` (floored at 1e-20)::

    y_t = x_t - m                    (--norm-means=true, the default)
    y_t = (x_t - m) / sqrt(v)        (--norm-vars=true)

**Deltas** (``src/featbin/add-deltas.cc``, ``feat/feature-functions.cc: DeltaFeatures``),
``--delta-order 2 --delta-window 2``. The order-``i`` filter is the order-``i-1`` filter
convolved with ``j / Σ_{k=-N}^{N} k²`` for ``j = -N..N`` (N = window = 2, Σk² = 10), so
order 1 is ``[-2, -1, 0, 1, 2] / 10`` and order 2 is that convolved with itself (9 taps,
``[4, 4, 1, -4, -10, -4, 1, 4, 4] / 100``). Output frame ``t`` is
``[x_t, Σ_j s1_j x_{t+j}, Σ_j s2_j x_{t+j}]`` with ``t+j`` clamped to ``[0, T-1]`` (the
edge frames repeated), so 13-dim MFCCs become 39-dim.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from paravg.features import cmvn_stats

DELTA_ORDER = 2
DELTA_WINDOW = 2
VAR_FLOOR = 1e-20


def delta_scales(order: int = DELTA_ORDER, window: int = DELTA_WINDOW) -> list[np.ndarray]:
    """The filters of ``DeltaFeatures``: ``scales[i]`` has ``2·i·window + 1`` taps,
    centred (tap ``k`` multiplies frame ``t + k - i·window``)."""
    if order < 0 or window < 1:
        raise ValueError(f"delta order {order} and window {window}: need order >= 0, window >= 1")
    offsets = np.arange(-window, window + 1, dtype=np.float64)
    step = offsets / float(np.sum(offsets * offsets))
    scales = [np.ones(1)]
    for _ in range(order):
        scales.append(np.convolve(scales[-1], step))
    return scales


def add_deltas(
    feats: np.ndarray, order: int = DELTA_ORDER, window: int = DELTA_WINDOW
) -> np.ndarray:
    """``add-deltas``: ``feats [T, D]`` -> ``[T, D·(order+1)]`` (float32), the static
    features then each order's filtered copy, frame indices clamped at the edges."""
    x = np.asarray(feats, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected features [T, D], got shape {x.shape}")
    frames = x.shape[0]
    blocks = []
    for scales in delta_scales(order, window):
        half = (len(scales) - 1) // 2
        out = np.zeros_like(x)
        for k, scale in enumerate(scales):
            if scale != 0.0:
                rows = np.clip(np.arange(frames) + k - half, 0, max(frames - 1, 0))
                out += scale * x[rows]
        blocks.append(out)
    return np.concatenate(blocks, axis=1).astype(np.float32)


def apply_cmvn(feats: np.ndarray, stats: np.ndarray, norm_vars: bool = False) -> np.ndarray:
    """``apply-cmvn`` with one speaker's ``2 x (D+1)`` stats (``ApplyCmvn``)."""
    stats = np.asarray(stats, dtype=np.float64)
    x = np.asarray(feats, dtype=np.float64)
    count = stats[0, -1]
    if count < 1.0:
        raise ValueError(f"CMVN stats with count {count} < 1")
    mean = stats[0, :-1] / count
    if stats.shape[1] - 1 != x.shape[1]:
        raise ValueError(f"CMVN stats of dim {stats.shape[1] - 1} for features of dim {x.shape[1]}")
    if not norm_vars:
        return (x - mean).astype(np.float32)
    var = np.maximum(stats[1, :-1] / count - mean * mean, VAR_FLOOR)
    return ((x - mean) / np.sqrt(var)).astype(np.float32)


def speaker_cmvn_stats(
    feats: Mapping[str, np.ndarray], utt2spk: Mapping[str, str]
) -> dict[str, np.ndarray]:
    """``compute-cmvn-stats --spk2utt``: per speaker, the sum of its utterances' stats."""
    stats: dict[str, np.ndarray] = {}
    for utt, x in feats.items():
        spk = utt2spk[utt]
        s = cmvn_stats(x)
        stats[spk] = s if spk not in stats else stats[spk] + s
    return stats


def gmm_features(
    feats: Mapping[str, np.ndarray],
    utt2spk: Mapping[str, str],
    cmvn: Mapping[str, np.ndarray] | None = None,
    norm_vars: bool = False,
    delta_order: int = DELTA_ORDER,
    delta_window: int = DELTA_WINDOW,
) -> dict[str, np.ndarray]:
    """``apply-cmvn --utt2spk … | add-deltas``: the features train_mono.sh trains on.
    ``cmvn`` (speaker -> stats) defaults to the speakers' stats over ``feats`` itself."""
    cmvn = speaker_cmvn_stats(feats, utt2spk) if cmvn is None else cmvn
    return {
        utt: add_deltas(apply_cmvn(x, cmvn[utt2spk[utt]], norm_vars), delta_order, delta_window)
        for utt, x in feats.items()
    }
