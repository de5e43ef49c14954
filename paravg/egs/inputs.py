"""Reading the inputs of the egs stage, with the length checks of ``nnet3-get-egs``.

Inputs (the file contract): ``feats.scp`` (float matrices T × D), ``utt2num_frames``,
``targets.scp`` (int32 vectors: one pdf id per frame), ``utt2spk``, optional ``utt2uniq``
and, with i-vectors, ``ivector_online.scp`` (⌈T/period⌉ × dim) plus ``ivector_period``.

Length rules (``src/nnet3bin/nnet3-get-egs.cc``):
* targets: |len(targets) − T| ≤ ``targets_length_tolerance`` (2). Within the tolerance
  extra targets are dropped and missing ones become zero-weight frames (Kaldi leaves the
  posterior of a missing frame empty); beyond it is an error.
* i-vectors: |T − rows·period| ≤ 100 and rows > 0, else an error (Kaldi skips with a
  warning; a silently smaller training set is worse than a clear error here).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Container
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.kaldi_io import iter_table, load_scp, read_int_table, table_dict

__all__ = [
    "read_int_table",
    "read_scp_keys",
    "read_table",
    "read_utt2spk",
    "read_utt2uniq",
]  # used by the egs modules

IVECTOR_LENGTH_TOLERANCE = 100


def read_table(path: str | os.PathLike, columns: int = 2) -> dict[str, str]:
    """A Kaldi ``<key> <value>`` table (value = rest of the line if columns == 0)."""
    return table_dict(path, num_fields=2 if columns == 2 else None)


# The egs plan holds a few tables of the same utterances: their names are interned
# (``sys.intern``), so each utterance's name is one string, whichever table holds it.


def read_utt2spk(path: str | os.PathLike) -> dict[str, str]:
    """``utt2spk`` (two fields a line), names interned (one string per utterance and per
    speaker): per utterance a dict slot."""
    return {
        sys.intern(r.key): sys.intern(r.fields[0])
        for r in iter_table(path, num_fields=2, require_sorted=False)
    }


def read_utt2uniq(path: str | os.PathLike) -> dict[str, str]:
    """``utt2uniq``, names interned."""
    return {
        sys.intern(r.key): sys.intern(r.fields[0])
        for r in iter_table(path, num_fields=2, require_sorted=False)
    }


def read_lengths(path: str | os.PathLike) -> dict[str, int]:
    """``<utt> <int>`` lines (``utt2num_frames``), names interned; the errors of
    :func:`paravg.kaldi_io.read_int_table`."""
    out = {}
    for r in iter_table(path, num_fields=2, require_sorted=False):
        try:
            out[sys.intern(r.key)] = int(r.fields[0])
        except ValueError:
            raise DataError(
                f"{path}:{r.lineno}: {r.key}: expected an integer, got {r.fields[0]!r}"
            ) from None
    return out


def read_scp_keys(path: str | os.PathLike) -> list[str]:
    """Keys of a ``.scp`` file, in file order (streamed: no line held but its key),
    interned."""
    return [sys.intern(row.key) for row in iter_table(path, require_sorted=False)]


def read_ivector_period(path: str | os.PathLike) -> int:
    text = Path(path).read_text().split()
    if len(text) != 1 or not text[0].isdigit() or int(text[0]) < 1:
        raise DataError(f"{path}: expected one positive integer (the i-vector period)")
    return int(text[0])


def fit_targets(
    utt: str, targets: np.ndarray, num_frames: int, tolerance: int, where: str = "targets"
) -> tuple[np.ndarray, np.ndarray]:
    """Targets of length ``num_frames`` and a mask of frames that have one.

    Truncates up to ``tolerance`` extra targets, marks up to ``tolerance`` missing ones
    as absent (mask False, label 0), and raises beyond that.
    """
    targets = np.asarray(targets)
    if targets.ndim != 1:
        raise DataError(f"{where}: utterance {utt}: expected an int vector, got {targets.shape}")
    if abs(len(targets) - num_frames) > tolerance:
        raise DataError(
            f"{where}: utterance {utt}: {len(targets)} targets but {num_frames} feature "
            f"frames (tolerance {tolerance} frames, egs.targets_length_tolerance)"
        )
    labels = np.zeros(num_frames, dtype=np.int32)
    mask = np.zeros(num_frames, dtype=bool)
    n = min(len(targets), num_frames)
    labels[:n] = targets[:n]
    mask[:n] = True
    return labels, mask


def check_ivector_rows(
    utt: str, num_rows: int, num_frames: int, period: int, where: str = "ivectors"
) -> None:
    """Kaldi's check: rows > 0 and |T − rows·period| ≤ 100."""
    if num_rows == 0 or abs(num_frames - num_rows * period) > IVECTOR_LENGTH_TOLERANCE:
        raise DataError(
            f"{where}: utterance {utt}: {num_rows} i-vector rows (period {period}, i.e. "
            f"{num_rows * period} frames) but {num_frames} feature frames (tolerance "
            f"{IVECTOR_LENGTH_TOLERANCE} frames)"
        )


@dataclass(frozen=True)
class Utterance:
    """One utterance's data as the eg writer needs it."""

    utt: str
    feats: np.ndarray  # (T, D) float32
    labels: np.ndarray  # (T,) int32
    label_mask: np.ndarray  # (T,) bool: False where the targets were missing (tolerance)
    ivectors: np.ndarray | None  # (rows, ivector_dim) float32


class EgsSources:
    """Random access to the features, targets and i-vectors of utterances
    (:class:`paravg.kaldi_io.ScpTable`); with ``utts``, of those utterances only (a split
    job's list: it holds the index lines of its share of the corpus, not the corpus's)."""

    def __init__(
        self,
        feats_scp: str | os.PathLike,
        targets_scp: str | os.PathLike,
        ivector_scp: str | os.PathLike | None = None,
        ivector_period: int = 0,
        targets_length_tolerance: int = 2,
        utts: Container[str] | None = None,
    ) -> None:
        self.feats_scp = str(feats_scp)
        self.targets_scp = str(targets_scp)
        self.ivector_scp = str(ivector_scp) if ivector_scp else None
        self.ivector_period = ivector_period
        self.tolerance = targets_length_tolerance
        self._feats = load_scp(self.feats_scp, utts)
        self._targets = load_scp(self.targets_scp, utts)
        self._ivectors = load_scp(self.ivector_scp, utts) if ivector_scp else None

    def load(self, utt: str, expected_frames: int | None = None) -> Utterance:
        """Load and check one utterance (errors name the file and the utterance)."""
        feats = np.asarray(self._feats[utt], dtype=np.float32)
        if feats.ndim != 2:
            raise DataError(f"{self.feats_scp}: utterance {utt}: expected a matrix")
        T = feats.shape[0]
        if expected_frames is not None and expected_frames != T:
            raise DataError(
                f"{self.feats_scp}: utterance {utt}: {T} frames but utt2num_frames says "
                f"{expected_frames}"
            )
        labels, mask = fit_targets(utt, self._targets[utt], T, self.tolerance, self.targets_scp)
        ivectors = None
        if self._ivectors is not None:
            ivectors = np.asarray(self._ivectors[utt], dtype=np.float32)
            check_ivector_rows(utt, ivectors.shape[0], T, self.ivector_period, self.ivector_scp)
        return Utterance(utt, feats, labels, mask, ivectors)
