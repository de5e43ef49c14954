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
from collections.abc import Container, Iterator

import numpy as np

from paravg.errors import DataError

log = logging.getLogger(__name__)


# DataError (a data-directory file that cannot be used, naming the file and line) is
# paravg.errors.DataError, imported here under its former place.


def read_spk2utt(path: str | os.PathLike) -> dict[str, list[str]]:
    """``spk2utt`` as an ordered mapping speaker -> utterances."""
    return dict(_iter_spk2utt(path))


def _iter_spk2utt(path: str | os.PathLike) -> Iterator[tuple[str, list[str]]]:
    """``(speaker, utterances)`` of each line of ``spk2utt``, read line by line, checked
    (fields, a speaker twice: the names of the speakers seen are held)."""
    seen: set[str] = set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) < 2:
                raise DataError(
                    f"{path}:{lineno}: expected '<speaker> <utt> [<utt> ...]', got "
                    f"{line.rstrip(chr(10))!r}"
                )
            if fields[0] in seen:
                raise DataError(f"{path}:{lineno}: speaker {fields[0]!r} appears twice")
            seen.add(fields[0])
            yield fields[0], fields[1:]


def read_job_spk2utt(path: str | os.PathLike, job: int, nj: int) -> dict[str, list[str]]:
    """The lines of ``spk2utt`` that job ``job`` of ``nj`` takes (:func:`split_speakers`'
    block), read in two passes: the first counts each speaker's utterances (per speaker
    a count and a name), the second keeps the job's lines: the job holds its share of
    the file, not the file."""
    if not 0 <= job < nj:
        raise ValueError(f"job {job} is outside 0..{nj - 1}")
    counts = [len(utts) for _, utts in _iter_spk2utt(path)]
    jobs = speaker_jobs(counts, nj)
    return {spk: utts for k, (spk, utts) in enumerate(_iter_spk2utt(path)) if jobs[k] == job}


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
    speakers = list(spk2utt)
    jobs: list[list[str]] = [[] for _ in range(max(nj, 0))]
    for spk, j in zip(speakers, speaker_jobs([len(spk2utt[s]) for s in speakers], nj), strict=True):
        jobs[j].append(spk)
    return jobs


def speaker_jobs(counts: list[int], nj: int) -> list[int]:
    """The job of each speaker (in order) given its utterance count: contiguous blocks
    balanced by utterance count, each speaker in the job of its middle utterance."""
    if nj < 1:
        raise ValueError(f"nj must be >= 1, got {nj}")
    if not counts:
        return []
    n = np.array(counts, dtype=np.float64)
    ends = np.cumsum(n)
    total = ends[-1]
    out = []
    for end, c in zip(ends, n, strict=True):
        mid = end - c / 2.0  # assign by the speaker's middle utterance
        out.append(min(nj - 1, int(mid * nj / total)))
    return out


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


class _Wanted:
    """A one-key container: the utterance a sequential reader is asked for."""

    key: str | None = None

    def __contains__(self, key: object) -> bool:
        return key == self.key


class SequentialFeatureSource:
    """``feats.scp`` read line by line in step with requests in file order (a job's
    utterances in ``spk2utt`` order, when that is the sorted order of ``feats.scp``, as
    in Kaldi's data dirs whose utterance ids start with the speaker id): one line held
    at a time, as Kaldi's sequential table readers. Names the file and utterance in every
    error, as :class:`FeatureSource`."""

    def __init__(self, feats_scp: str | os.PathLike):
        from paravg.kaldi_io import iter_scp

        self.path = str(feats_scp)
        self._wanted = _Wanted()
        self._rows = iter_scp(self.path, self._wanted)

    def __getitem__(self, utt: str) -> np.ndarray:
        self._wanted.key = utt
        try:
            _, _, feats = next(self._rows)
        except StopIteration:
            raise DataError(f"{self.path}: no features for utterance {utt!r}") from None
        except DataError as exc:
            raise DataError(f"{self.path}: cannot read feature table ({exc})") from exc
        feats = np.asarray(feats)
        if feats.ndim != 2:
            raise DataError(f"{self.path}: utterance {utt!r} is not a matrix (shape {feats.shape})")
        return feats


def job_features(
    feats_scp: str | os.PathLike, job_spk2utt: dict[str, list[str]], job: int, where: str
) -> tuple[FeatureSource | SequentialFeatureSource, dict[str, list[str]]]:
    """The feature reader of a job and its speakers with the utterances that have
    features (the others skipped with a warning, as :func:`job_speakers`).

    The job's utterances are looked up in one pass over ``feats.scp`` (only their
    names held). When they are processed in the file's order (each speaker's utterances
    in ``spk2utt`` after the previous one's, ascending: the usual Kaldi data dir) the
    reader is a :class:`SequentialFeatureSource` (nothing held per utterance); else a
    :class:`FeatureSource` of the job's lines."""
    from paravg.kaldi_io import iter_table

    mine = {u for utts in job_spk2utt.values() for u in utts}
    try:
        have = {
            row.key for row in iter_table(feats_scp, min_fields=2, require_sorted=False, keys=mine)
        }
    except DataError as exc:
        raise DataError(f"{feats_scp}: cannot read feature table ({exc})") from exc
    del mine
    out: dict[str, list[str]] = {}
    missing = 0
    for spk, spk_utts in job_spk2utt.items():
        utts = [u for u in spk_utts if u in have]
        missing += len(spk_utts) - len(utts)
        if utts:
            out[spk] = utts
    if missing:
        log.warning("%s: %d utterances of job %d have no features; skipped", where, missing, job)
    order = (u for utts in out.values() for u in utts)
    prev = next(order, None)
    in_order = True
    for u in order:
        if u <= prev:
            in_order = False
            break
        prev = u
    if in_order and _scp_sorted(feats_scp):
        return SequentialFeatureSource(feats_scp), out
    return FeatureSource(feats_scp, have), out


def _scp_sorted(path: str | os.PathLike) -> bool:
    """Whether the keys of a table are in ``LC_ALL=C`` order (one pass, one key held)."""
    prev = None
    with open(path, "rb") as f:
        for line in f:
            key = line.split(maxsplit=1)[0] if line.strip() else b""
            if prev is not None and key < prev:
                return False
            prev = key
    return True


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
