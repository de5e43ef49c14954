"""Speakers, pseudo-speakers, job splits and feature reading for the i-vector stages.

* ``spk2utt`` order is the processing order (Kaldi: utterances of a speaker in
  ``spk2utt`` order, speakers in file order).
* Pseudo-speakers (``utils/data/modify_speaker_info.sh --utts-per-spk-max N``): each
  speaker's utterance list is cut into consecutive groups of at most N; group ``k``
  (from 1) of speaker ``s`` is speaker ``s-k``. Online adaptation state then resets every
  N utterances, as on the training data of Kaldi's recipes.
* Jobs: the speaker list is cut into ``nj`` contiguous parts of about equal utterance
  counts (``utils/split_data.sh`` splits by speaker, so a speaker's state stays in one job).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Container
from pathlib import Path

import numpy as np

from paravg.errors import DataError

log = logging.getLogger(__name__)


# DataError (a data-directory file that cannot be used, naming the file and line) is
# paravg.errors.DataError, imported here under its former place.


def read_spk2utt(path: str | os.PathLike) -> dict[str, list[str]]:
    """``spk2utt`` as an ordered mapping speaker -> utterances."""
    out: dict[str, list[str]] = {}
    for lineno, line in enumerate(Path(path).read_text().splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise DataError(
                f"{path}:{lineno}: expected '<speaker> <utt> [<utt> ...]', got {line!r}"
            )
        if fields[0] in out:
            raise DataError(f"{path}:{lineno}: speaker {fields[0]!r} appears twice")
        out[fields[0]] = fields[1:]
    return out


def pseudo_speakers(spk2utt: dict[str, list[str]], utts_per_spk_max: int) -> dict[str, list[str]]:
    """Cut every speaker into consecutive groups of at most ``utts_per_spk_max`` utterances."""
    if utts_per_spk_max < 1:
        raise ValueError(f"utts_per_spk_max must be >= 1, got {utts_per_spk_max}")
    out: dict[str, list[str]] = {}
    for spk, utts in spk2utt.items():
        for k in range(0, len(utts), utts_per_spk_max):
            out[f"{spk}-{k // utts_per_spk_max + 1}"] = utts[k : k + utts_per_spk_max]
    return out


def split_speakers(spk2utt: dict[str, list[str]], nj: int) -> list[list[str]]:
    """Contiguous speaker blocks, one per job, balanced by utterance count."""
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    speakers = list(spk2utt)
    counts = np.array([len(spk2utt[s]) for s in speakers], dtype=np.float64)
    if not speakers:
        return [[] for _ in range(nj)]
    ends = np.cumsum(counts)
    total = ends[-1]
    jobs: list[list[str]] = [[] for _ in range(nj)]
    for spk, end, n in zip(speakers, ends, counts, strict=True):
        mid = end - n / 2.0  # assign by the speaker's middle utterance
        jobs[min(nj - 1, int(mid * nj / total))].append(spk)
    return jobs


def even_subset(items: list[str], n: int) -> list[str]:
    """``n`` items spread evenly over the list (``utils/subset_scp.pl`` without shuffling)."""
    if n <= 0 or n >= len(items):
        return list(items)
    return [items[int((k + 0.5) * len(items) / n)] for k in range(n)]


class FeatureSource:
    """Lazy ``feats.scp`` reader that names the file and utterance in every error."""

    def __init__(self, feats_scp: str | os.PathLike, utts: Container[str] | None = None):
        """``utts``: hold only these utterances' lines (a job's share of the set)."""
        from paravg.kaldi_io import load_scp

        self.path = str(feats_scp)
        try:
            self.table = load_scp(self.path, utts)
        except DataError as exc:
            raise DataError(f"{self.path}: cannot read feature table ({exc})") from exc

    def __contains__(self, utt: str) -> bool:
        return utt in self.table

    def keys(self) -> list[str]:
        return list(self.table.keys())

    def __getitem__(self, utt: str) -> np.ndarray:
        try:
            feats = np.asarray(self.table[utt])
        except KeyError:
            raise DataError(f"{self.path}: no features for utterance {utt!r}") from None
        if feats.ndim != 2:
            raise DataError(f"{self.path}: utterance {utt!r} is not a matrix (shape {feats.shape})")
        return feats


def job_speakers(
    spk2utt: dict[str, list[str]], feats: FeatureSource, job: int, nj: int, where: str
) -> dict[str, list[str]]:
    """The speakers (with the utterances that have features) of job ``job`` of ``nj``.

    Utterances without features are skipped with a warning (the features stage reports them).
    """
    if not 0 <= job < nj:
        raise ValueError(f"job {job} is outside 0..{nj - 1}")
    out: dict[str, list[str]] = {}
    missing = 0
    for spk in split_speakers(spk2utt, nj)[job]:
        utts = [u for u in spk2utt[spk] if u in feats]
        missing += len(spk2utt[spk]) - len(utts)
        if utts:
            out[spk] = utts
    if missing:
        log.warning("%s: %d utterances of job %d have no features; skipped", where, missing, job)
    return out
