"""The Kaldi data dir: its model and its validation, and where a prepared dir came from.

A Kaldi data dir (``utils/validate_data_dir.sh``, ``utils/fix_data_dir.sh``) holds:

* ``wav.scp``   ``<recording> <rxfilename>`` (read by :mod:`paravg.audio`: a path, a
  ``cmd |`` pipe or a WAV at a byte offset of a file).
* ``segments``  optional, ``<utt> <recording> <start s> <end s>``; ``end = -1`` means "to the
  end" (:class:`paravg.audio.Segment`). Without it every recording is one utterance with the
  recording's id.
* ``utt2spk``   ``<utt> <speaker>``; ``spk2utt`` (``<speaker> <utt> ...``) is derived when
  missing and checked against ``utt2spk`` when present.
* ``text``      optional transcripts (copied, not used for training).
* ``utt2uniq``  optional ``<utt> <source utt>`` of perturbed copies (the egs stage holds out
  all copies of a validation utterance); ``reco2file_and_channel`` optional, copied.
* targets       per-frame integer targets (pdf ids), as ``ali-to-pdf`` writes them:
  ``{targets,ali}.scp`` (into a binary or text ark), ``{targets,ali}.ark`` or
  ``{targets,ali}.txt`` (text form ``utt 0 0 31 ...``).

Kaldi requires every table to be sorted by key in ``LC_ALL=C`` order (byte order, which is
Python's ``str`` order) with unique keys; we check the same and name the file and line of the
first violation (:func:`read_data_dir`, :func:`iter_checked_targets`, both through
:mod:`paravg.kaldi_io`). A prepared dir (``results/data/<set>``, written by
:mod:`paravg.prepare_data`) keeps an :class:`Origin` so that every later error names the
user's file and line; :func:`check_target_lengths` applies ``nnet3-get-egs``'s length rule
once the features exist.

Related modules: :mod:`paravg.audio` reads the audio (files, pipes, segments);
:mod:`paravg.prepare_data` checks a source dir and writes the prepared copy.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from paravg.audio import Segment, parse_wav_rxfilename
from paravg.errors import DataError
from paravg.kaldi_io import (
    Place,
    RxFilename,
    TableLine,
    iter_int_vectors,
    iter_table,
    parse_rxfilename,
    read_table,
    write_table,
)

TARGET_FILE_NAMES = (
    "targets.scp",
    "targets.ark",
    "targets.txt",
    "ali.scp",
    "ali.ark",
    "ali.txt",
)
OPTIONAL_COPIED_FILES = ("segments", "text", "reco2file_and_channel")
# Optional files of a source dir that preparation reads (besides targets).
READ_OPTIONAL_FILES = ("segments", "text", "spk2utt", "utt2uniq", "reco2file_and_channel")


# ------------------------------------------------------------------------------ data dir
@dataclass
class DataDir:
    """A structurally valid Kaldi data dir (no audio read, targets not loaded)."""

    path: Path
    wav: dict[str, RxFilename]
    wav_lines: dict[str, int]
    utt2spk: dict[str, str]
    spk2utt: dict[str, list[str]]
    segments: dict[str, Segment] | None = None
    text: dict[str, str] | None = None
    warnings: list[str] = field(default_factory=list)
    utt2uniq: dict[str, str] | None = None
    reco2file_and_channel: dict[str, str] | None = None
    origin: Origin | None = None  # of a prepared dir: where each line came from
    #: the source's ``text`` when it has one (its keys checked even when ``text`` is not
    #: held: :func:`read_data_dir` with ``hold_text=False``)
    text_file: Path | None = None

    @property
    def utterances(self) -> list[str]:
        """Utterance ids in ``LC_ALL=C`` order."""
        return sorted(self.utt2spk)

    def recording(self, utt: str) -> str:
        return self.segments[utt].recording if self.segments is not None else utt

    def segment(self, utt: str) -> Segment | None:
        return self.segments[utt] if self.segments is not None else None

    def where(self, utt: str) -> str:
        """'file:line' of the wav.scp entry an utterance comes from, for error messages:
        the user's file and line when this is a prepared dir with its :class:`Origin`."""
        if self.origin is not None and utt in self.origin.wav_line:
            return self.origin.wav(utt)
        reco = self.recording(utt)
        seg = f" (segments line {self.segments[utt].lineno})" if self.segments else ""
        return f"{self.path / 'wav.scp'}:{self.wav_lines[reco]}: utterance {utt!r}{seg}"


def first_keys(items: Iterable[str], n: int = 5) -> str:
    """The first ``n`` of ``items`` in sorted order, quoted, and their count when there are
    more: the list an error message shows."""
    items = sorted(items)
    more = f" ... ({len(items)} in all)" if len(items) > n else ""
    return ", ".join(repr(x) for x in items[:n]) + more


class _FirstKeys:
    """The keys of a sorted stream as :func:`first_keys` shows them, holding only the
    first ``n`` and the count (a merge-join's side of a set difference)."""

    def __init__(self, n: int = 5):
        self.n, self.count, self.first = n, 0, []

    def add(self, key: str) -> None:
        self.count += 1
        if len(self.first) < self.n:
            self.first.append(key)

    def __str__(self) -> str:
        more = f" ... ({self.count} in all)" if self.count > self.n else ""
        return ", ".join(repr(x) for x in self.first) + more


def _sorted_difference(left: Iterable[str], right: Iterable[str]) -> tuple[_FirstKeys, _FirstKeys]:
    """The keys only in ``left`` and only in ``right``, two sorted streams of unique keys,
    by a merge-join (``join -v`` of sorted files): nothing held per key."""
    only_left, only_right = _FirstKeys(), _FirstKeys()
    rights = iter(right)
    nxt = next(rights, None)
    for key in left:
        while nxt is not None and nxt < key:
            only_right.add(nxt)
            nxt = next(rights, None)
        if nxt == key:
            nxt = next(rights, None)
        else:
            only_left.add(key)
    while nxt is not None:
        only_right.add(nxt)
        nxt = next(rights, None)
    return only_left, only_right


def _check_same_utterances(only_spk, only_audio, u2s_file, audio_file) -> None:
    """Raise when utt2spk and the audio table (wav.scp or segments) list other
    utterances: :func:`_sorted_difference`'s two sides, each named by its file."""
    if only_spk.count or only_audio.count:
        msg = []
        if only_spk.count:
            msg.append(f"in {u2s_file} but not in {audio_file}: {only_spk}")
        if only_audio.count:
            msg.append(f"in {audio_file} but not in {u2s_file}: {only_audio}")
        raise DataError("utterance lists disagree; " + "; ".join(msg))


def _check_text_keys(text_file: Path, u2s_file: Path, utts: Iterable[str], num_utts: int) -> None:
    """``text`` names only the utterances ``utts`` (of ``utt2spk``, ``num_utts`` of them)
    and covers them all, checked as a merge-join of the two sorted key streams
    (``utils/validate_data_dir.sh`` joins the sorted files): nothing is held per line.
    ``utts`` is in ``utt2spk``'s (checked, sorted) order."""
    unknown, untranscribed = _sorted_difference(
        (line.key for line in iter_table(text_file, min_fields=1)), utts
    )
    if unknown.count:
        raise DataError(f"{text_file}: utterances not in {u2s_file}: {unknown}")
    if untranscribed.count:  # WER over the rest would be silently optimistic
        raise DataError(
            f"{text_file}: {untranscribed.count} of {num_utts} utterances of {u2s_file} "
            f"have no transcript: {untranscribed}; a text file covers every "
            "utterance (utils/validate_data_dir.sh), or remove it to evaluate without WER"
        )


def _checked_segment(line: TableLine, seg_file: Path, intern: bool = False) -> Segment:
    """The :class:`Segment` of a ``segments`` line, checked as
    ``utils/validate_data_dir.sh`` and ``extract-segments.cc`` read it: 4 fields (a 5th,
    the channel, only ``0``), numeric times, ``0 <= start < end`` or ``end = -1``. With
    ``intern`` the recording id is interned (for a caller that holds every segment)."""
    where = f"{seg_file}:{line.lineno}"
    if len(line.fields) == 4 and line.fields[3] != "0":
        raise DataError(
            f"{where}: channel field {line.fields[3]!r}: only mono audio (channel 0) is supported"
        )
    if len(line.fields) > 4:
        raise DataError(f"{where}: expected 4 or 5 fields, found {len(line.fields) + 1}")
    reco, s_start, s_end = line.fields[:3]
    try:
        start, end = float(s_start), float(s_end)
    except ValueError as exc:
        raise DataError(
            f"{where}: start/end times must be numbers, got {s_start!r} {s_end!r}"
        ) from exc
    if not (start >= 0 and (end == -1 or end > start)):
        raise DataError(
            f"{where}: invalid segment {start} .. {end} (need 0 <= start < end, or end = -1)"
        )
    reco = sys.intern(reco) if intern else reco
    return Segment(reco, start, end, line.lineno, " ".join(line.fields[:3]))


def read_data_dir(path: str | os.PathLike, *, hold_text: bool = True) -> DataDir:
    """Read and check the text files of a data dir (``utils/validate_data_dir.sh``).

    Checks: required files exist; every table is sorted with unique keys and the right
    number of fields; segments have numeric times with ``0 <= start < end`` (or ``end =
    -1``) and name known recordings; the utterances of ``utt2spk``, ``segments`` (or
    ``wav.scp`` without segments) agree; ``spk2utt``, when present, is the inverse of
    ``utt2spk``; ``text`` names only known utterances and covers them. No audio is read.

    Utterance and recording ids are interned (one string each, however many tables name
    it). With ``hold_text=False`` the transcripts are checked (a merge-join of the sorted
    keys) but not held: ``text`` is None and ``text_file`` names the file, for a caller
    that streams it (:mod:`paravg.prepare_data`).
    """
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: data directory does not exist")
    wav_file = path / "wav.scp"
    wav: dict[str, RxFilename] = {}
    wav_lines: dict[str, int] = {}
    for line in iter_table(wav_file):
        reco = sys.intern(line.key)
        wav[reco] = parse_wav_rxfilename(line.rest, f"{wav_file}:{line.lineno}")
        wav_lines[reco] = line.lineno

    u2s_file = path / "utt2spk"
    names: dict[str, str] = {}  # one string per speaker, shared by its utterances
    utt2spk = {
        sys.intern(line.key): names.setdefault(line.fields[0], line.fields[0])
        for line in iter_table(u2s_file, num_fields=2)
    }
    del names
    if not utt2spk:
        raise DataError(f"{u2s_file}: no utterances")

    segments = None
    seg_file = path / "segments"
    if seg_file.exists():
        segments = {}
        for line in iter_table(seg_file, min_fields=4):
            seg = _checked_segment(line, seg_file, intern=True)
            if seg.recording not in wav:
                raise DataError(
                    f"{seg_file}:{line.lineno}: recording {seg.recording!r} is not in {wav_file}"
                )
            segments[sys.intern(line.key)] = seg
        utts_of_audio, audio_file = segments, seg_file
    else:
        utts_of_audio, audio_file = wav, wav_file

    # both in their files' (checked, sorted) order: a merge-join
    _check_same_utterances(*_sorted_difference(utt2spk, utts_of_audio), u2s_file, audio_file)

    derived: dict[str, list[str]] = {}
    for utt in utt2spk:  # in its file's (checked, sorted) order
        derived.setdefault(utt2spk[utt], []).append(utt)
    spk2utt = {spk: derived[spk] for spk in sorted(derived)}
    s2u_file = path / "spk2utt"
    if s2u_file.exists():
        given: set[str] = set()
        for line in iter_table(s2u_file, min_fields=2):
            given.add(line.key)
            if sorted(line.fields) != spk2utt.get(line.key):
                raise DataError(
                    f"{s2u_file}:{line.lineno}: speaker {line.key!r} lists utterances "
                    f"{first_keys(line.fields)} but utt2spk gives "
                    f"{first_keys(spk2utt.get(line.key, []))}"
                )
        missing = set(spk2utt) - given
        if missing:
            raise DataError(f"{s2u_file}: speakers of utt2spk missing: {first_keys(missing)}")

    warnings = []
    # sorting by (speaker, utterance) keeps the (sorted) utterance order exactly when the
    # speakers never decrease along it: one pair of neighbours at a time
    if any(a > b for a, b in itertools.pairwise(utt2spk.values())):
        warnings.append(
            f"{u2s_file}: utterance order differs from speaker order (Kaldi recommends "
            "speaker ids as prefixes of utterance ids); split jobs will not keep speakers "
            "together"
        )

    text = None
    text_file: Path | None = path / "text"
    if text_file.exists():
        _check_text_keys(text_file, u2s_file, utt2spk, len(utt2spk))
        if hold_text:
            text = {sys.intern(line.key): line.rest for line in iter_table(text_file, min_fields=1)}
    else:
        text_file = None

    utt2uniq = None
    uniq_file = path / "utt2uniq"
    if uniq_file.exists():
        utt2uniq = {line.key: line.fields[0] for line in iter_table(uniq_file, num_fields=2)}
        unknown = set(utt2uniq) - set(utt2spk)
        if unknown:
            raise DataError(f"{uniq_file}: utterances not in {u2s_file}: {first_keys(unknown)}")

    r2fc = None
    r2fc_file = path / "reco2file_and_channel"
    if r2fc_file.exists():
        r2fc = {line.key: line.rest for line in iter_table(r2fc_file, num_fields=3)}
        unknown = set(r2fc) - set(wav)
        if unknown:
            raise DataError(f"{r2fc_file}: recordings not in {wav_file}: {first_keys(unknown)}")

    return DataDir(
        path,
        wav,
        wav_lines,
        utt2spk,
        spk2utt,
        segments,
        text,
        warnings,
        utt2uniq,
        r2fc,
        text_file=text_file,
    )


# ------------------------------------------------------------------------------ streamed scan
@dataclass
class ScannedDataDir:
    """A data dir checked as :func:`read_data_dir` checks it, by :func:`scan_data_dir`,
    holding nothing per utterance: its files, its size and how its sorted tables line up
    (which lets :func:`iter_utterance_rows` and :mod:`paravg.prepare_data` join them as
    they are read)."""

    path: Path
    num_utterances: int
    #: speakers never decrease along the (sorted) utterances (Kaldi's convention: speaker
    #: ids prefix utterance ids): ``spk2utt`` is ``utt2spk``'s runs of one speaker
    speakers_in_order: bool
    #: with segments, recordings never decrease along them (Kaldi's convention: recording
    #: ids prefix utterance ids): each recording's segments are consecutive
    recordings_in_order: bool
    segments_file: Path | None
    text_file: Path | None
    utt2uniq_file: Path | None
    reco2file_and_channel_file: Path | None
    warnings: list[str] = field(default_factory=list)

    @property
    def wav_file(self) -> Path:
        return self.path / "wav.scp"

    @property
    def utt2spk_file(self) -> Path:
        return self.path / "utt2spk"


def _keys(path: Path, **checks) -> Iterator[str]:
    """The keys of a (checked, sorted) table as they are read."""
    return (line.key for line in iter_table(path, **checks))


def _speakers_grouped(
    pairs: Iterable[tuple[str, str]], in_order: bool
) -> Iterator[tuple[str, list[str]]]:
    """``(speaker, its utterances)`` in speaker order from ``(utterance, speaker)`` pairs
    in utterance order (``utils/utt2spk_to_spk2utt.pl``). With ``in_order`` (speakers
    never decrease along the pairs) each speaker's utterances are one run: one speaker
    held at a time; otherwise every speaker's list is held (the memory of ``utt2spk``)."""
    if in_order:
        for spk, run in itertools.groupby(pairs, key=lambda p: p[1]):
            yield spk, [u for u, _ in run]
        return
    derived: dict[str, list[str]] = {}
    for utt, spk in pairs:
        derived.setdefault(spk, []).append(utt)
    for spk in sorted(derived):
        yield spk, derived.pop(spk)


def _check_segments_streamed(seg_file: Path, wav_file: Path) -> bool:
    """Every line of ``segments`` checked (:func:`_checked_segment`) and its recording
    found in ``wav.scp``: a merge-join of the two sorted files while the recordings never
    decrease along the segments (one key of each held); from the first one that does, the
    set of ``wav.scp``'s recordings (one name per recording). Returns whether they never
    decreased."""
    wav_keys = _keys(wav_file)
    wav_key = next(wav_keys, None)
    known: set[str] | None = None
    prev: str | None = None
    for line in iter_table(seg_file, min_fields=4):
        reco = _checked_segment(line, seg_file).recording
        if known is None and prev is not None and reco < prev:
            known = set(_keys(wav_file))
        prev = reco
        if known is None:
            while wav_key is not None and wav_key < reco:
                wav_key = next(wav_keys, None)
            found = wav_key == reco
        else:
            found = reco in known
        if not found:
            raise DataError(f"{seg_file}:{line.lineno}: recording {reco!r} is not in {wav_file}")
    return known is None


def scan_data_dir(path: str | os.PathLike) -> ScannedDataDir:
    """Check a data dir as :func:`read_data_dir` does (every check, the same errors),
    reading each table line by line and holding nothing per utterance: the cross-checks
    are merge-joins of the sorted files (``utils/validate_data_dir.sh`` runs ``join`` and
    ``comm`` on them), ``spk2utt`` is compared one speaker at a time.

    What it may hold: one speaker's utterances (``spk2utt``); only where a file breaks
    Kaldi's conventions (checked, not required) a table per speaker or recording: the
    derived ``spk2utt`` when speakers are not in utterance order (the same case warns),
    the set of ``wav.scp``'s recordings when segments are not in recording order.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: data directory does not exist")
    wav_file = path / "wav.scp"
    for line in iter_table(wav_file):
        parse_wav_rxfilename(line.rest, f"{wav_file}:{line.lineno}")

    u2s_file = path / "utt2spk"
    num_utts, speakers_in_order, prev_spk = 0, True, None
    for line in iter_table(u2s_file, num_fields=2):
        num_utts += 1
        spk = line.fields[0]
        speakers_in_order &= prev_spk is None or prev_spk <= spk
        prev_spk = spk
    if not num_utts:
        raise DataError(f"{u2s_file}: no utterances")

    seg_file: Path | None = path / "segments"
    recordings_in_order = True
    if seg_file.exists():
        recordings_in_order = _check_segments_streamed(seg_file, wav_file)
        audio_keys, audio_file = _keys(seg_file, min_fields=4), seg_file
    else:
        seg_file = None
        audio_keys, audio_file = _keys(wav_file), wav_file

    def utt_keys() -> Iterator[str]:
        return _keys(u2s_file, num_fields=2)

    _check_same_utterances(*_sorted_difference(utt_keys(), audio_keys), u2s_file, audio_file)

    s2u_file = path / "spk2utt"
    if s2u_file.exists():
        pairs = ((r.key, r.fields[0]) for r in iter_table(u2s_file, num_fields=2))
        groups = _speakers_grouped(pairs, speakers_in_order)
        group = next(groups, None)
        missing = _FirstKeys()
        for line in iter_table(s2u_file, min_fields=2):
            while group is not None and group[0] < line.key:
                missing.add(group[0])
                group = next(groups, None)
            derived = group[1] if group is not None and group[0] == line.key else None
            if sorted(line.fields) != derived:
                raise DataError(
                    f"{s2u_file}:{line.lineno}: speaker {line.key!r} lists utterances "
                    f"{first_keys(line.fields)} but utt2spk gives {first_keys(derived or [])}"
                )
            group = next(groups, None)
        while group is not None:
            missing.add(group[0])
            group = next(groups, None)
        if missing.count:
            raise DataError(f"{s2u_file}: speakers of utt2spk missing: {missing}")

    warnings = []
    if not speakers_in_order:
        warnings.append(
            f"{u2s_file}: utterance order differs from speaker order (Kaldi recommends "
            "speaker ids as prefixes of utterance ids); split jobs will not keep speakers "
            "together"
        )

    text_file: Path | None = path / "text"
    if text_file.exists():
        _check_text_keys(text_file, u2s_file, utt_keys(), num_utts)
    else:
        text_file = None

    uniq_file: Path | None = path / "utt2uniq"
    if uniq_file.exists():
        unknown, _ = _sorted_difference(_keys(uniq_file, num_fields=2), utt_keys())
        if unknown.count:
            raise DataError(f"{uniq_file}: utterances not in {u2s_file}: {unknown}")
    else:
        uniq_file = None

    r2fc_file: Path | None = path / "reco2file_and_channel"
    if r2fc_file.exists():
        unknown, _ = _sorted_difference(_keys(r2fc_file, num_fields=3), _keys(wav_file))
        if unknown.count:
            raise DataError(f"{r2fc_file}: recordings not in {wav_file}: {unknown}")
    else:
        r2fc_file = None

    return ScannedDataDir(
        path,
        num_utts,
        speakers_in_order,
        recordings_in_order,
        seg_file,
        text_file,
        uniq_file,
        r2fc_file,
        warnings,
    )


class UtteranceRow(NamedTuple):
    """One utterance of a scanned data dir as :func:`iter_utterance_rows` joins it."""

    utt: str
    speaker: str
    recording: str
    wav_lineno: int
    wav: RxFilename
    segment: Segment | None


def iter_utterance_rows(scan: ScannedDataDir) -> Iterator[UtteranceRow]:
    """The utterances of a data dir checked by :func:`scan_data_dir`, in ``utt2spk``'s
    (sorted) order, each joined with its speaker, its recording's ``wav.scp`` line and
    its segment, as the files are read (their keys agree: checked). Holds one line of
    each file; only with segments out of recording order, each recording's ``wav.scp``
    line number and value (a table per recording)."""
    u2s = iter_table(scan.utt2spk_file, num_fields=2)
    if scan.segments_file is None:
        for u, w in zip(u2s, iter_table(scan.wav_file), strict=True):
            yield UtteranceRow(u.key, u.fields[0], w.key, w.lineno, parse_rxfilename(w.rest), None)
        return
    wavs = iter_table(scan.wav_file)
    wav = next(wavs, None)
    held: dict[str, tuple[int, str]] | None = None
    if not scan.recordings_in_order:
        held = {w.key: (w.lineno, w.rest) for w in iter_table(scan.wav_file)}
    for u, s in zip(u2s, iter_table(scan.segments_file, min_fields=4), strict=True):
        seg = _checked_segment(s, scan.segments_file)
        reco = seg.recording
        if held is None:
            while wav is not None and wav.key < reco:
                wav = next(wavs, None)
            lineno, value = wav.lineno, wav.rest
        else:
            lineno, value = held[reco]
        yield UtteranceRow(u.key, u.fields[0], reco, lineno, parse_rxfilename(value), seg)


# ------------------------------------------------------------------------------ origin
ORIGIN_FILE = "origin"


@dataclass(frozen=True)
class Origin:
    """Where each utterance of a prepared dir came from in the user's files, so every
    later error cites the user's file and line, never the prepared copy.

    Stored as ``results/data/<set>/origin``, one line per kept utterance:
    ``<utt> <wav.scp line> <segments line, 0 without segments> <targets place>`` (a line
    number, or ``@<byte>`` in a binary ark), plus the three source paths in
    ``report.json`` (``source_files``).
    """

    wav_scp: str
    segments: str | None
    targets: str
    wav_line: dict[str, int]
    segment_line: dict[str, int]
    targets_place: dict[str, Place]

    def wav(self, utt: str) -> str:
        seg = ""
        if self.segments and self.segment_line.get(utt):
            seg = f" ({self.segments}:{self.segment_line[utt]})"
        return f"{self.wav_scp}:{self.wav_line[utt]}: utterance {utt!r}{seg}"

    def targets_of(self, utt: str) -> str:
        place = self.targets_place.get(utt)
        return f"{place if place else self.targets}: utterance {utt!r}"

    def write(self, prepared: Path, utts: Iterable[str]) -> None:
        write_origin(
            prepared,
            (
                (u, self.wav_line[u], self.segment_line.get(u, 0), self.targets_place[u])
                for u in utts
            ),
        )

    def files(self) -> dict[str, str | None]:
        return {"wav.scp": self.wav_scp, "segments": self.segments, "targets": self.targets}


def write_origin(prepared: Path, rows: Iterable[tuple[str, int, int, Place]]) -> None:
    """Write ``prepared/origin`` from ``(utt, wav.scp line, segments line or 0, targets
    place)`` rows as they come (:class:`Origin`'s file; no table held)."""
    write_table(
        prepared / ORIGIN_FILE,
        ((u, f"{wav} {seg} {place.token()}") for u, wav, seg, place in rows),
    )


def _origin_files(prepared: Path) -> dict[str, str | None] | None:
    """The source files of a prepared dir's :class:`Origin` (``report.json``), or
    ``None`` when it has no origin."""
    from paravg.io import read_json

    if not (prepared / ORIGIN_FILE).is_file() or not (prepared / "report.json").is_file():
        return None
    return read_json(prepared / "report.json").get("source_files") or None


def read_origin(prepared: str | os.PathLike) -> Origin | None:
    """The :class:`Origin` of a prepared dir; ``None`` when it has none."""
    prepared = Path(prepared)
    files = _origin_files(prepared)
    if files is None:
        return None
    wav_line, seg_line, places = {}, {}, {}
    for row in read_table(prepared / ORIGIN_FILE, num_fields=4):
        wav_line[row.key] = int(row.fields[0])
        seg_line[row.key] = int(row.fields[1])
        places[row.key] = Place.from_token(files["targets"], row.fields[2])
    return Origin(files["wav.scp"], files["segments"], files["targets"], wav_line, seg_line, places)


def source_text_lines(prepared: str | os.PathLike) -> tuple[Path, dict[str, int]] | None:
    """The user's ``text`` that the prepared set ``prepared`` was copied from, and each
    utterance's line in it: what a later warning about the text names (never the copy
    under ``results/data/``). None when the set records no source or its text is gone."""
    from paravg.io import read_json

    try:
        source = read_json(Path(prepared) / "report.json").get("source")
    except (OSError, ValueError):
        return None
    text = Path(source) / "text" if source else None
    if text is None or not text.is_file():
        return None
    return text, {r.key: r.lineno for r in read_table(text, min_fields=1, require_sorted=False)}


# ------------------------------------------------------------------------------ one split, streamed
@dataclass(frozen=True)
class PreparedUtterance:
    """One utterance of a prepared dir as a feature job reads it: its recording's
    rxfilename, its segment (or None) and where it came from (for errors)."""

    utt: str
    recording: str
    wav: RxFilename
    segment: Segment | None
    where: str


def iter_prepared_utterances(
    prepared: str | os.PathLike, start: int, stop: int
) -> Iterator[PreparedUtterance]:
    """Utterances ``start .. stop - 1`` (0-based, in the sorted order of ``utt2spk``) of
    a prepared dir (or any checked data dir), read line by line: its sorted tables
    (``utt2spk``, ``origin``, ``segments``; ``wav.scp`` too without segments, whose keys
    are then the utterances) are joined as they are read, as ``utils/split_data.sh``
    gives each job its own lines. With segments, the ``wav.scp`` lines of the split's
    recordings are held (one per recording). Nothing else is held per utterance; the
    checks are the prepared dir's (:func:`read_data_dir` ran on its source)."""
    path = Path(prepared)
    u2s_file, wav_file, seg_file = path / "utt2spk", path / "wav.scp", path / "segments"
    has_segments = seg_file.is_file()
    files = _origin_files(path)
    empty: Iterator[TableLine] = iter(())
    origin_rows = iter_table(path / ORIGIN_FILE, num_fields=4) if files is not None else empty
    seg_rows = iter_table(seg_file, min_fields=4) if has_segments else empty
    wav_rows = empty
    wav_of: dict[str, tuple[RxFilename, int]] = {}
    if has_segments:  # the split's recordings, then their wav.scp lines
        recos = {
            row.fields[0]
            for row in itertools.islice(iter_table(seg_file, min_fields=4), start, stop)
        }
        for row in iter_table(wav_file, keys=recos):
            where = f"{wav_file}:{row.lineno}"
            wav_of[row.key] = (parse_wav_rxfilename(row.rest, where), row.lineno)
    else:
        wav_rows = iter_table(wav_file)
    tables = (
        (ORIGIN_FILE, files is not None),
        ("segments", has_segments),
        ("wav.scp", not has_segments),
    )
    rows = itertools.zip_longest(
        iter_table(u2s_file, num_fields=2), origin_rows, seg_rows, wav_rows
    )
    for i, (u2s, orig, seg_row, wav_row) in enumerate(rows):
        if i >= stop:
            break
        for row, (name, used) in zip((orig, seg_row, wav_row), tables, strict=True):
            if used and (row is None or u2s is None or row.key != u2s.key):
                what = f"utterance {row.key!r}" if row is not None else "no line"
                has = f"{u2s.key!r} (line {u2s.lineno})" if u2s is not None else "no line"
                raise DataError(
                    f"{path / name}: {what} at line {i + 1}, where {u2s_file} has {has}: "
                    "the prepared tables disagree; run prepare_data for this set again"
                )
        utt = u2s.key
        if i < start:
            continue
        segment = None
        if seg_row is not None:
            reco, s_start, s_end = seg_row.fields[:3]
            segment = Segment(
                reco, float(s_start), float(s_end), seg_row.lineno, " ".join(seg_row.fields[:3])
            )
            if reco not in wav_of:
                raise DataError(
                    f"{seg_file}:{seg_row.lineno}: recording {reco!r} is not in {wav_file}"
                )
            wav, wav_line = wav_of[reco]
        else:
            reco = utt
            wav, wav_line = (
                parse_wav_rxfilename(wav_row.rest, f"{wav_file}:{wav_row.lineno}"),
                wav_row.lineno,
            )
        if orig is not None:
            one = Origin(
                files["wav.scp"], files["segments"], files["targets"],
                {utt: int(orig.fields[0])}, {utt: int(orig.fields[1])}, {},
            )  # fmt: skip
            where = one.wav(utt)
        else:
            seg = f" (segments line {segment.lineno})" if segment is not None else ""
            where = f"{wav_file}:{wav_line}: utterance {utt!r}{seg}"
        yield PreparedUtterance(utt, reco, wav, segment, where)


# ------------------------------------------------------------------------------ targets
def find_targets_file(path: str | os.PathLike) -> Path:
    """The targets file of a data dir: the first of ``TARGET_FILE_NAMES`` that exists."""
    path = Path(path)
    for name in TARGET_FILE_NAMES:
        if (path / name).is_file():
            return path / name
    raise DataError(
        f"{path}: no targets file; expected one of {', '.join(TARGET_FILE_NAMES)} holding "
        "per-frame pdf ids (Kaldi's ali.*.gz hold transition ids: convert them with "
        "ali-to-pdf final.mdl 'ark:gunzip -c ali.*.gz|' ark,t:ali.txt)"
    )


def iter_checked_targets(
    path: str | os.PathLike, num_targets: int = 0, seen: dict[str, Place] | None = None
) -> Iterator[tuple[str, np.ndarray, Place]]:
    """``(key, int32 vector, place)`` of each entry of a targets file
    (:func:`paravg.kaldi_io.iter_int_vectors`), one at a time, checked.

    Every vector must be non-empty with entries in ``[0, num_targets)`` (``[0, 2^31)``
    when ``num_targets`` is 0: not configured) and keys unique; errors name the file, the
    line and the utterance. While the keys ascend (Kaldi's tables are sorted) a duplicate
    is the previous entry's key and nothing is held per key; from the first key out of
    order the places of every key read are held (those before it read again), the table
    the uniqueness check then needs. ``seen`` (filled here: key -> place) keeps that
    table for the caller from the start.
    """
    places: dict[str, Place] | None = seen
    prev: tuple[str, Place] | None = None
    limit = num_targets or 2**31
    what = f"data.num_targets = {num_targets}" if num_targets else "2^31"
    for index, (key, vec, place) in enumerate(iter_int_vectors(path)):
        where = f"{place}: utterance {key!r}"
        if places is None and prev is not None and key < prev[0]:
            places = {k: p for k, _, p in itertools.islice(iter_int_vectors(path), index)}
        if places is not None:
            first = places.get(key)
        else:
            first = prev[1] if prev is not None and key == prev[0] else None
        if first is not None:
            raise DataError(f"{where}: duplicate targets for this utterance (first at {first})")
        if vec.size == 0:
            raise DataError(f"{where}: empty target vector")
        low, high = int(vec.min()), int(vec.max())
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            frame = int(np.flatnonzero(vec == bad)[0])
            raise DataError(f"{where}: target id {bad} at frame {frame} is outside [0, {what})")
        if places is not None:
            places[key] = place
        prev = (key, place)
        yield key, vec.astype(np.int32), place


# ------------------------------------------------------------------------------ source files
def source_files(src: str | os.PathLike) -> list[Path]:
    """Every file of the data dir ``src`` that :func:`paravg.prepare_data.prepare_data_dir`
    reads (the
    inputs of rule ``prepare_data``): ``wav.scp``, ``utt2spk`` and those of the optional
    files, the targets file and the archives its scp names that exist. Audio files are
    not listed (an edit of wav.scp is seen; a wav replaced under the same name is not)."""
    src = Path(src)
    files = [src / "wav.scp", src / "utt2spk"]
    files += [src / n for n in READ_OPTIONAL_FILES if (src / n).is_file()]
    targets = next((src / n for n in TARGET_FILE_NAMES if (src / n).is_file()), None)
    if targets is not None:
        files.append(targets)
        if targets.suffix == ".scp":
            files += _scp_archives(targets)
    return files


def _scp_archives(scp: Path) -> list[Path]:
    """The existing files an scp's offset/file entries name (unparsable lines skipped:
    preparation reports them)."""
    from paravg.kaldi_io import classify_rxfilename

    names: dict[str, None] = {}
    for raw in scp.read_text(errors="replace").splitlines():
        parts = raw.strip().split(maxsplit=1)
        if len(parts) != 2:
            continue
        value = parts[1].strip()
        kind = classify_rxfilename(value)
        if kind == "offset":
            names[os.path.normpath(value.rsplit(":", 1)[0])] = None
        elif kind == "file":
            names[os.path.normpath(value)] = None
    return [Path(n) for n in names if Path(n).is_file()]


# ------------------------------------------------------------------------------ feature lengths
def check_target_lengths(
    prepared: str | os.PathLike,
    utt2num_frames: Mapping[str, int] | Iterable[tuple[str, int]],
    tolerance: int,
) -> dict:
    """Kaldi's ``nnet3-get-egs`` length rule, right after the features exist: every
    utterance with features has targets with ``|len(targets) - T| <= tolerance``
    (``egs.targets_length_tolerance``). The error names the utterance and its place in
    the user's targets file (through the prepared dir's :class:`Origin`).

    ``utt2num_frames``: a mapping, or ``(utt, frames)`` pairs in ``LC_ALL=C`` order (the
    merged ``utt2num_frames`` as it is read). The prepared ``targets.scp`` is sorted (a
    prepared dir is written in utterance order), so the two are joined as they are read
    (``join`` of two sorted tables): one target vector in memory, nothing per utterance.
    A ``targets.scp`` out of order (never written so) is an error."""
    prepared = Path(prepared)
    pairs = (
        sorted(utt2num_frames.items())
        if isinstance(utt2num_frames, Mapping)
        else iter(utt2num_frames)
    )
    worst = 0
    targets = _sorted_target_lengths(prepared / "targets.scp")
    key, length = next(targets, (None, 0))
    for utt, frames in pairs:
        while key is not None and key < utt:
            key, length = next(targets, (None, 0))
        if key is None:
            break
        if key != utt:
            continue
        worst = max(worst, _check_target_length(prepared, utt, length, frames, tolerance))
    return {"max_target_length_difference": worst, "targets_length_tolerance": tolerance}


def _sorted_target_lengths(scp: Path) -> Iterator[tuple[str, int]]:
    """``(utt, number of targets)`` of a prepared ``targets.scp``, checked to be in key
    order (as :mod:`paravg.prepare_data` writes it) so that it can be joined."""
    prev = None
    for key, vec, place in iter_int_vectors(scp):
        if prev is not None and key < prev:
            raise DataError(
                f"{place}: utterance {key!r} comes after {prev!r}: a prepared targets.scp is "
                "written in LC_ALL=C order; run prepare_data for this set again"
            )
        prev = key
        yield key, vec.size


def _check_target_length(prepared: Path, utt: str, length: int, frames: int, tolerance: int) -> int:
    diff = length - frames
    if abs(diff) > tolerance:
        origin = read_origin(prepared)  # its per-utterance tables only for the error
        src = origin.targets_of(utt) if origin else f"{prepared / 'targets.scp'}: utterance {utt!r}"
        raise DataError(
            f"{src}: {length} targets but {frames} feature frames; at most "
            f"{tolerance} frames of difference are allowed "
            "(egs.targets_length_tolerance): is this alignment of this audio, "
            "made with the same frame shift?"
        )
    return abs(diff)
