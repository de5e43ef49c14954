"""Online cepstral mean normalisation, as Kaldi's ``apply-cmvn-online``.

Mirrors ``OnlineCmvn`` in ``src/feat/online-feature.{h,cc}`` with the defaults of
``OnlineCmvnOptions`` (the i-vector recipes' ``conf/online_cmvn.conf`` is empty):
``cmn_window = 600``, ``speaker_frames = 600``, ``global_frames = 200``,
``normalize_mean = true``, ``normalize_variance = false``.

CMVN statistics use Kaldi's layout: a ``2 x (D + 1)`` matrix whose row 0 holds the sum
of the frames and, in its last column, the count; row 1 holds the sum of squares.

At frame ``t`` of an utterance the statistics are the sliding-window sum over frames
``[max(0, t - cmn_window + 1), t]`` (count ``c_t = min(t + 1, cmn_window)``). When
``c_t < cmn_window`` they are topped up (``OnlineCmvn::SmoothOnlineCmvnStats``):

* with ``a = min(cmn_window - c_t, speaker_frames, n_spk)`` frames' worth of the speaker
  statistics (earlier utterances of the speaker), scaled by ``a / n_spk``;
* then with ``b = min(cmn_window - c_t - a, global_frames)`` frames' worth of the global
  statistics, scaled by ``b / n_global``.

The normalised frame is ``x_t - sum / count`` (mean only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from paravg.errors import DataError


@dataclass(frozen=True)
class OnlineCmvnOptions:
    """Kaldi's ``OnlineCmvnOptions`` (mean normalisation only)."""

    cmn_window: int = 600
    speaker_frames: int = 600
    global_frames: int = 200

    def __post_init__(self) -> None:
        if not (self.cmn_window > 0 and self.speaker_frames >= 0 and self.global_frames >= 0):
            raise DataError(f"invalid online CMVN options {self}")
        if self.speaker_frames > self.cmn_window or self.global_frames > self.cmn_window:
            raise DataError("speaker_frames and global_frames must not exceed cmn_window")


def stats_of(feats: np.ndarray) -> np.ndarray:
    """CMVN statistics of a ``T x D`` matrix (``compute-cmvn-stats`` for one utterance)."""
    x = np.asarray(feats, dtype=np.float64)
    dim = x.shape[1]
    stats = np.zeros((2, dim + 1))
    stats[0, :dim] = x.sum(axis=0)
    stats[1, :dim] = (x * x).sum(axis=0)
    stats[0, dim] = x.shape[0]
    return stats


def check_stats(stats: np.ndarray, dim: int, what: str) -> np.ndarray:
    """Return ``stats`` as float64 after checking it is a ``2 x (dim + 1)`` matrix."""
    stats = np.asarray(stats, dtype=np.float64)
    if stats.shape != (2, dim + 1):
        raise DataError(
            f"{what}: CMVN stats have shape {stats.shape}, expected (2, {dim + 1}) for "
            f"{dim}-dimensional features"
        )
    return stats


def apply_online_cmn(
    feats: np.ndarray,
    global_stats: np.ndarray,
    speaker_stats: np.ndarray | None = None,
    opts: OnlineCmvnOptions = OnlineCmvnOptions(),
) -> np.ndarray:
    """Online mean normalisation of one utterance (``OnlineCmvn::GetFrame`` for all t).

    ``speaker_stats`` are the statistics of the speaker's earlier utterances (``None``
    for the first one); ``global_stats`` must have a positive count. Returns float64.
    """
    x = np.asarray(feats, dtype=np.float64)
    if x.ndim != 2:
        raise DataError(f"features must be a T x D matrix, got shape {x.shape}")
    num_frames, dim = x.shape
    global_stats = check_stats(global_stats, dim, "global")
    global_count = global_stats[0, dim]
    if global_count <= 0:
        raise DataError(
            "global CMVN stats have a zero count (Kaldi: 'Global CMN stats are required')"
        )
    if num_frames == 0:
        return x.copy()
    window = opts.cmn_window
    csum = np.cumsum(x, axis=0)
    win_sum = csum.copy()
    if num_frames > window:
        win_sum[window:] -= csum[:-window]
    count = np.minimum(np.arange(1, num_frames + 1, dtype=np.float64), window)
    total_sum = win_sum
    total_count = count.copy()
    if speaker_stats is not None:
        speaker_stats = check_stats(speaker_stats, dim, "speaker")
        spk_count = speaker_stats[0, dim]
        if spk_count > 0:
            take = np.minimum(np.minimum(window - total_count, opts.speaker_frames), spk_count)
            take = np.maximum(take, 0.0)
            total_sum = total_sum + np.outer(take / spk_count, speaker_stats[0, :dim])
            total_count = total_count + take
    take = np.minimum(window - total_count, opts.global_frames)
    take = np.maximum(take, 0.0)
    total_sum = total_sum + np.outer(take / global_count, global_stats[0, :dim])
    total_count = total_count + take
    return x - total_sum / total_count[:, None]


def add_utterance(speaker_stats: np.ndarray | None, feats: np.ndarray) -> np.ndarray:
    """Speaker statistics after an utterance (``OnlineCmvn::GetState`` at its last frame)."""
    stats = stats_of(feats)
    if speaker_stats is not None:
        stats += check_stats(speaker_stats, stats.shape[1] - 1, "speaker")
    return stats


def limit_frames(speaker_stats: np.ndarray | None, max_frames: float) -> np.ndarray | None:
    """Scale speaker statistics down to a count of at most ``max_frames``.

    The CMVN half of ``OnlineIvectorExtractorAdaptationState::LimitFrames``.
    """
    if speaker_stats is None:
        return None
    count = speaker_stats[0, -1]
    if count > max_frames:
        return speaker_stats * (max_frames / count)
    return speaker_stats
