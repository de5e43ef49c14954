"""Kaldi data directories: read, validate and prepare them; read their audio and targets.

A Kaldi data dir (``utils/validate_data_dir.sh``, ``utils/fix_data_dir.sh``) holds:

* ``wav.scp``   ``<recording> <rxfilename>`` classified by Kaldi's rules
  (:mod:`paravg.kaldi_io`): a value ending in ``|`` is a pipe (a shell command whose stdout
  is a WAV file; Kaldi runs it with ``popen``, and so do we: a wav.scp is code),
  ``<file>:<byte offset>`` a WAV stored in a file (``wav-copy`` output; ``cmd |:0`` is
  the file named ``cmd |``, never run), anything else a plain path.
* ``segments``  optional, ``<utt> <recording> <start s> <end s>``; ``end = -1`` means "to the
  end". Without it every recording is one utterance with the recording's id.
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
first violation. Audio is checked cheaply before any heavy work (``soundfile.info`` plus a
RIFF header walk for plain files, which catches unreadable, truncated, wrong-rate and
multi-channel files); pipe entries are checked for syntax only, because running them is the
same cost as reading the audio: the feature stage runs them and applies the same checks
(rate, channels, segment range) to what they return, before it computes anything for that
utterance.

Segment boundaries follow Kaldi's ``featbin/extract-segments.cc``: ``start_samp =
int(start * rate)``, ``end_samp = int(end * rate)``; an end that overshoots the recording by
less than ``MAX_OVERSHOOT_S`` (0.5 s) is truncated, more is an error (Kaldi skips with a
warning; we stop, because a data dir with such segments is usually a wrong wav.scp).

Audio is returned at int16 scale (Kaldi's ``WaveData`` convention: a 16-bit sample keeps its
integer value); other sample formats are converted by ``soundfile`` to [-1, 1) and scaled by
32768, which equals Kaldi for 16-bit PCM and keeps the extra precision of 24/32-bit files.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile

from paravg.errors import DataError
from paravg.io import write_json_atomic
from paravg.kaldi_io import (
    Place,
    RxFilename,
    TableLine,  # noqa: F401 (re-exported: paravg.data.TableLine)
    iter_int_vectors,
    parse_rxfilename,
    read_object,
    read_table,
    write_ark_scp,
    write_table,
)

log = logging.getLogger(__name__)

MAX_OVERSHOOT_S = 0.5  # extract-segments --max-overshoot default
INT16_SCALE = 32768.0
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


# The former name of DataError in this module (the same class).
DataDirError = DataError


# ------------------------------------------------------------------------------ rxfilenames
_AUDIO_RANGE = re.compile(r"^(.*\S):(\d+)\[.*\]$")


def parse_wav_rxfilename(value: str, where: str = "") -> RxFilename:
    """A ``wav.scp`` value: Kaldi's ``ClassifyRxfilename`` (:func:`paravg.kaldi_io.
    classify_rxfilename`: ``cmd |`` is a pipe, ``name:offset`` a WAV inside a file,
    anything else a file), plus two checks that give a better message than "does not
    exist": ``ark:offset[range]`` (matrix ranges are not audio) and a file name with
    whitespace that names no file (usually a pipe without its trailing ``|``)."""
    rx = parse_rxfilename(value, where)
    prefix = f"{where}: " if where else ""
    if rx.kind == "file" and not Path(rx.target).exists():
        if _AUDIO_RANGE.match(rx.target):
            raise DataError(f"{prefix}{value!r}: ark ranges '[...]' are not supported for audio")
        if any(c.isspace() for c in rx.target):
            raise DataError(
                f"{prefix}{value!r} contains whitespace but is not a pipe (a pipe ends with '|')"
            )
    return rx


# ------------------------------------------------------------------------------ data dir
@dataclass(frozen=True)
class Segment:
    """A ``segments`` line; ``end == -1`` means the end of the recording."""

    recording: str
    start: float
    end: float
    lineno: int = 0
    text: str = ""  # "<recording> <start> <end>" as written in the source file

    def sample_range(self, num_samples: int, rate: int, where: str = "") -> tuple[int, int]:
        """Samples [a, b) of the recording, as ``extract-segments.cc`` computes them."""
        start = int(self.start * rate)
        end = num_samples if self.end == -1 else int(self.end * rate)
        prefix = f"{where}: " if where else ""
        dur = num_samples / rate
        if start >= num_samples:
            raise DataError(
                f"{prefix}segment starts at {self.start}s but recording {self.recording!r} "
                f"is {dur:.3f}s long"
            )
        if end > num_samples:
            if end >= num_samples + int(MAX_OVERSHOOT_S * rate):
                raise DataError(
                    f"{prefix}segment ends at {self.end}s, more than {MAX_OVERSHOOT_S}s "
                    f"past the end of recording {self.recording!r} ({dur:.3f}s)"
                )
            end = num_samples
        return start, end


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


def _first(items: Iterable[str], n: int = 5) -> str:
    items = sorted(items)
    more = f" ... ({len(items)} in all)" if len(items) > n else ""
    return ", ".join(repr(x) for x in items[:n]) + more


def read_data_dir(path: str | os.PathLike) -> DataDir:
    """Read and check the text files of a data dir (``utils/validate_data_dir.sh``).

    Checks: required files exist; every table is sorted with unique keys and the right
    number of fields; segments have numeric times with ``0 <= start < end`` (or ``end =
    -1``) and name known recordings; the utterances of ``utt2spk``, ``segments`` (or
    ``wav.scp`` without segments) agree; ``spk2utt``, when present, is the inverse of
    ``utt2spk``; ``text`` names only known utterances. No audio is read.
    """
    path = Path(path)
    if not path.is_dir():
        raise DataError(f"{path}: data directory does not exist")
    wav_file = path / "wav.scp"
    wav: dict[str, RxFilename] = {}
    wav_lines: dict[str, int] = {}
    for line in read_table(wav_file):
        wav[line.key] = parse_wav_rxfilename(line.rest, f"{wav_file}:{line.lineno}")
        wav_lines[line.key] = line.lineno

    u2s_file = path / "utt2spk"
    utt2spk = {line.key: line.fields[0] for line in read_table(u2s_file, num_fields=2)}
    if not utt2spk:
        raise DataError(f"{u2s_file}: no utterances")

    segments = None
    seg_file = path / "segments"
    if seg_file.exists():
        segments = {}
        for line in read_table(seg_file, min_fields=4):
            where = f"{seg_file}:{line.lineno}"
            if len(line.fields) == 4 and line.fields[3] != "0":
                raise DataError(
                    f"{where}: channel field {line.fields[3]!r}: only mono audio (channel 0) "
                    "is supported"
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
                    f"{where}: invalid segment {start} .. {end} (need 0 <= start < end, "
                    "or end = -1)"
                )
            if reco not in wav:
                raise DataError(f"{where}: recording {reco!r} is not in {wav_file}")
            segments[line.key] = Segment(reco, start, end, line.lineno, " ".join(line.fields[:3]))
        utts_of_audio, audio_file = set(segments), seg_file
    else:
        utts_of_audio, audio_file = set(wav), wav_file

    if set(utt2spk) != utts_of_audio:
        only_spk = set(utt2spk) - utts_of_audio
        only_audio = utts_of_audio - set(utt2spk)
        msg = []
        if only_spk:
            msg.append(f"in {u2s_file} but not in {audio_file}: {_first(only_spk)}")
        if only_audio:
            msg.append(f"in {audio_file} but not in {u2s_file}: {_first(only_audio)}")
        raise DataError("utterance lists disagree; " + "; ".join(msg))

    derived: dict[str, list[str]] = {}
    for utt in sorted(utt2spk):
        derived.setdefault(utt2spk[utt], []).append(utt)
    spk2utt = {spk: derived[spk] for spk in sorted(derived)}
    s2u_file = path / "spk2utt"
    if s2u_file.exists():
        given = read_table(s2u_file, min_fields=2)
        for line in given:
            if sorted(line.fields) != spk2utt.get(line.key):
                raise DataError(
                    f"{s2u_file}:{line.lineno}: speaker {line.key!r} lists utterances "
                    f"{_first(line.fields)} but utt2spk gives "
                    f"{_first(spk2utt.get(line.key, []))}"
                )
        missing = set(spk2utt) - {line.key for line in given}
        if missing:
            raise DataError(f"{s2u_file}: speakers of utt2spk missing: {_first(missing)}")

    warnings = []
    by_speaker = sorted(utt2spk, key=lambda u: (utt2spk[u], u))
    if by_speaker != sorted(utt2spk):
        warnings.append(
            f"{u2s_file}: utterance order differs from speaker order (Kaldi recommends "
            "speaker ids as prefixes of utterance ids); split jobs will not keep speakers "
            "together"
        )

    text = None
    text_file = path / "text"
    if text_file.exists():
        text = {line.key: line.rest for line in read_table(text_file, min_fields=1)}
        unknown = set(text) - set(utt2spk)
        if unknown:
            raise DataError(f"{text_file}: utterances not in {u2s_file}: {_first(unknown)}")
        untranscribed = set(utt2spk) - set(text)
        if untranscribed:  # WER over the rest would be silently optimistic
            raise DataError(
                f"{text_file}: {len(untranscribed)} of {len(utt2spk)} utterances of {u2s_file} "
                f"have no transcript: {_first(untranscribed)}; a text file covers every "
                "utterance (utils/validate_data_dir.sh), or remove it to evaluate without WER"
            )

    utt2uniq = None
    uniq_file = path / "utt2uniq"
    if uniq_file.exists():
        utt2uniq = {line.key: line.fields[0] for line in read_table(uniq_file, num_fields=2)}
        unknown = set(utt2uniq) - set(utt2spk)
        if unknown:
            raise DataError(f"{uniq_file}: utterances not in {u2s_file}: {_first(unknown)}")

    r2fc = None
    r2fc_file = path / "reco2file_and_channel"
    if r2fc_file.exists():
        r2fc = {line.key: line.rest for line in read_table(r2fc_file, num_fields=3)}
        unknown = set(r2fc) - set(wav)
        if unknown:
            raise DataError(f"{r2fc_file}: recordings not in {wav_file}: {_first(unknown)}")

    return DataDir(path, wav, wav_lines, utt2spk, spk2utt, segments, text, warnings, utt2uniq, r2fc)


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
        rows = (
            (
                u,
                f"{self.wav_line[u]} {self.segment_line.get(u, 0)} {self.targets_place[u].token()}",
            )
            for u in utts
        )
        write_table(prepared / ORIGIN_FILE, rows)

    def files(self) -> dict[str, str | None]:
        return {"wav.scp": self.wav_scp, "segments": self.segments, "targets": self.targets}


def read_origin(prepared: str | os.PathLike) -> Origin | None:
    """The :class:`Origin` of a prepared dir; ``None`` when it has none."""
    from paravg.io import read_json

    prepared = Path(prepared)
    if not (prepared / ORIGIN_FILE).is_file() or not (prepared / "report.json").is_file():
        return None
    files = read_json(prepared / "report.json").get("source_files")
    if not files:
        return None
    wav_line, seg_line, places = {}, {}, {}
    for row in read_table(prepared / ORIGIN_FILE, num_fields=4):
        wav_line[row.key] = int(row.fields[0])
        seg_line[row.key] = int(row.fields[1])
        places[row.key] = Place.from_token(files["targets"], row.fields[2])
    return Origin(files["wav.scp"], files["segments"], files["targets"], wav_line, seg_line, places)


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


def read_targets_with_places(
    path: str | os.PathLike, num_targets: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, Place]]:
    """Per-frame integer targets of a ``.scp``, ``.ark`` or ``.txt`` file
    (:func:`paravg.kaldi_io.iter_int_vectors`) and where each is in ``path`` (its line, or
    its byte in a binary ark).

    Every vector must be non-empty with entries in ``[0, num_targets)`` (``[0, 2^31)``
    when ``num_targets`` is 0: not configured) and keys unique; errors name the file, the
    line and the utterance.
    """
    out: dict[str, np.ndarray] = {}
    places: dict[str, Place] = {}
    limit = num_targets or 2**31
    what = f"data.num_targets = {num_targets}" if num_targets else "2^31"
    for key, vec, place in iter_int_vectors(path):
        where = f"{place}: utterance {key!r}"
        if key in out:
            raise DataError(
                f"{where}: duplicate targets for this utterance (first at {places[key]})"
            )
        if vec.size == 0:
            raise DataError(f"{where}: empty target vector")
        low, high = int(vec.min()), int(vec.max())
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            frame = int(np.flatnonzero(vec == bad)[0])
            raise DataError(f"{where}: target id {bad} at frame {frame} is outside [0, {what})")
        out[key] = vec.astype(np.int32)
        places[key] = place
    return out, places


def read_targets(path: str | os.PathLike, num_targets: int = 0) -> dict[str, np.ndarray]:
    """Per-frame integer targets (see :func:`read_targets_with_places`)."""
    return read_targets_with_places(path, num_targets)[0]


# ------------------------------------------------------------------------------ audio
@dataclass(frozen=True)
class AudioInfo:
    num_samples: int
    sample_rate: int
    channels: int


def _wav_declared_data_bytes(path: Path) -> tuple[int, int] | None:
    """(declared data-chunk bytes, bytes present after its header) of a RIFF/WAVE file."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        size = path.stat().st_size
        pos = 12
        while pos + 8 <= size:
            f.seek(pos)
            chunk = f.read(8)
            (length,) = struct.unpack("<I", chunk[4:])
            if chunk[:4] == b"data":
                return length, size - pos - 8
            pos += 8 + length + (length & 1)
    return None


def audio_info(rx: RxFilename, where: str) -> AudioInfo | None:
    """Cheap header check of a file or ark entry; ``None`` for pipes (not run here).

    Raises :class:`DataError` for a missing, unreadable or truncated file.
    """
    if rx.kind == "pipe":
        return None
    if rx.kind == "offset":
        rate, samples = _read_ark_wav(rx, where)
        return AudioInfo(samples.shape[0], rate, 1 if samples.ndim == 1 else samples.shape[1])
    path = Path(rx.target)
    if not path.is_file():
        raise DataError(
            f"{where}: audio file {rx.target!r} does not exist (relative paths are resolved "
            f"against the working directory {os.getcwd()})"
        )
    try:
        info = soundfile.info(str(path))
    except Exception as exc:  # libsndfile raises its own error types
        raise DataError(f"{where}: cannot read audio {rx.target!r}: {exc}") from exc
    if info.format == "WAV":
        declared = _wav_declared_data_bytes(path)
        if declared is not None:
            want, have = declared
            if want not in (0, 0xFFFFFFFF) and have < want:
                raise DataError(
                    f"{where}: audio file {rx.target!r} is truncated: header declares "
                    f"{want} data bytes, file holds {have}"
                )
    return AudioInfo(info.frames, info.samplerate, info.channels)


def _patch_streamed_wav(data: bytes) -> bytes:
    """A WAV written to a pipe may declare 0 data bytes; make libsndfile read to EOF."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    pos = 12
    while pos + 8 <= len(data):
        (length,) = struct.unpack_from("<I", data, pos + 4)
        if data[pos : pos + 4] == b"data":
            if length == 0 and len(data) > pos + 8:
                out = bytearray(data)
                struct.pack_into("<I", out, 4, 0xFFFFFFFF)
                struct.pack_into("<I", out, pos + 4, 0xFFFFFFFF)
                return bytes(out)
            return data
        pos += 8 + length + (length & 1)
    return data


def _read_ark_wav(rx: RxFilename, where: str) -> tuple[int, np.ndarray]:
    """The WAV at byte ``rx.offset`` of the file ``rx.target`` (opened here: a name ending
    in ``|`` is a file name, never a command)."""
    try:
        obj = read_object(rx.target, rx.offset, where)
    except DataError as exc:
        raise DataError(f"{exc} (cannot read WAV from ark entry {rx.text!r})") from exc
    if not isinstance(obj, tuple):
        raise DataError(f"{where}: ark entry {rx.text!r} is not audio")
    rate, samples = obj
    samples = np.asarray(samples)
    if np.issubdtype(samples.dtype, np.integer) and samples.dtype.itemsize == 2:
        samples = samples.astype(np.float32)
    elif np.issubdtype(samples.dtype, np.floating):
        samples = (samples * INT16_SCALE).astype(np.float32)
    else:
        raise DataError(f"{where}: ark entry {rx.text!r}: unsupported sample type")
    return int(rate), samples


def _decode(source, where: str, what: str) -> tuple[int, np.ndarray]:
    try:
        samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
    except Exception as exc:
        raise DataError(f"{where}: cannot read audio from {what}: {exc}") from exc
    return int(rate), samples * np.float32(INT16_SCALE)


def read_recording(rx: RxFilename, where: str = "") -> tuple[int, np.ndarray]:
    """Read a whole recording: ``(rate, samples)``, samples ``float32 [N]`` or ``[N, C]``
    at int16 scale. Runs a pipe entry through ``/bin/sh`` (Kaldi's ``popen``)."""
    if rx.kind == "pipe":
        proc = subprocess.run(rx.target, shell=True, capture_output=True, check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()[-500:]
            raise DataError(
                f"{where}: command {rx.target!r} failed with exit status {proc.returncode}: {err}"
            )
        if not proc.stdout:
            raise DataError(f"{where}: command {rx.target!r} wrote no audio")
        rate, samples = _decode(io.BytesIO(_patch_streamed_wav(proc.stdout)), where, rx.text)
    elif rx.kind == "offset":
        rate, samples = _read_ark_wav(rx, where)
    else:
        if not Path(rx.target).is_file():
            raise DataError(f"{where}: audio file {rx.target!r} does not exist")
        rate, samples = _decode(rx.target, where, repr(rx.target))
    if samples.ndim == 2 and samples.shape[1] == 1:
        samples = samples[:, 0]
    return rate, np.ascontiguousarray(samples)


def read_audio(
    entry: str | RxFilename,
    segment: Segment | None = None,
    sample_rate: int | None = None,
    where: str = "",
) -> np.ndarray:
    """Samples of one utterance as ``float32 [N]`` at int16 scale.

    ``entry`` is a wav.scp value (or a parsed one); ``segment`` cuts it as
    ``extract-segments`` does. Raises :class:`DataError` (naming ``where``) for
    unreadable audio, a sample rate other than ``sample_rate``, more than one channel,
    or a segment out of range.
    """
    rx = entry if isinstance(entry, RxFilename) else parse_wav_rxfilename(entry, where)
    rate, samples = read_recording(rx, where)
    check_audio_format(rate, samples.shape[1] if samples.ndim == 2 else 1, sample_rate, where)
    if segment is not None:
        a, b = segment.sample_range(samples.shape[0], rate, where)
        samples = samples[a:b]
    return samples


def check_audio_format(rate: int, channels: int, sample_rate: int | None, where: str) -> None:
    """Raise unless the audio is mono at ``sample_rate`` (when given)."""
    if sample_rate is not None and rate != sample_rate:
        raise DataError(
            f"{where}: sample rate {rate} Hz, expected {sample_rate} Hz (data.sample_rate); "
            f"resample it, e.g. with a pipe: sox <file> -r {sample_rate} -t wav - |"
        )
    if channels != 1:
        raise DataError(
            f"{where}: {channels} channels, expected mono; e.g. sox <file> -t wav - remix 1 |"
        )


class AudioReader:
    """Read utterances of a data dir, keeping the last recording (segments of one recording
    are consecutive in sorted order, so each recording is read and piped once)."""

    def __init__(self, data: DataDir, sample_rate: int | None):
        self.data = data
        self.sample_rate = sample_rate
        self._cached: tuple[str, int, np.ndarray] | None = None

    def __call__(self, utt: str) -> np.ndarray:
        data = self.data
        reco = data.recording(utt)
        where = data.where(utt)
        if self._cached is None or self._cached[0] != reco:
            rate, samples = read_recording(data.wav[reco], where)
            self._cached = (reco, rate, samples)
        _, rate, samples = self._cached
        check_audio_format(
            rate, samples.shape[1] if samples.ndim == 2 else 1, self.sample_rate, where
        )
        seg = data.segment(utt)
        if seg is not None:
            a, b = seg.sample_range(samples.shape[0], rate, where)
            return samples[a:b]
        return samples


def check_audio(data: DataDir, sample_rate: int) -> dict:
    """Header-check every recording used by ``data`` and every segment's range.

    Returns ``{"duration_s": ..., "unchecked_pipes": [recordings]}``; the duration
    counts checked utterances only.
    """
    used = {data.recording(u) for u in data.utt2spk}
    infos: dict[str, AudioInfo | None] = {}
    wav_file = data.path / "wav.scp"
    for reco in sorted(used):
        where = f"{wav_file}:{data.wav_lines[reco]}: recording {reco!r}"
        info = audio_info(data.wav[reco], where)
        if info is not None:
            check_audio_format(info.sample_rate, info.channels, sample_rate, where)
        infos[reco] = info
    duration = 0.0
    for utt in data.utterances:
        info = infos[data.recording(utt)]
        if info is None:
            continue
        seg = data.segment(utt)
        if seg is None:
            duration += info.num_samples / info.sample_rate
        else:
            where = f"{data.path / 'segments'}:{seg.lineno}: utterance {utt!r}"
            a, b = seg.sample_range(info.num_samples, info.sample_rate, where)
            duration += (b - a) / info.sample_rate
    pipes = sorted(r for r, i in infos.items() if i is None)
    return {"duration_s": round(duration, 3), "unchecked_pipes": pipes}


# ------------------------------------------------------------------------------ prepare
# Every file a prepared dir may hold (the declared outputs of rule prepare_data and the
# optional copies); only these are ever removed from it.
PREPARED_FILES = (
    "wav.scp",
    "utt2spk",
    "spk2utt",
    "utt2uniq",
    "targets.ark",
    "targets.scp",
    ORIGIN_FILE,
    "report.json",
    *OPTIONAL_COPIED_FILES,
)


def source_files(src: str | os.PathLike) -> list[Path]:
    """Every file of the data dir ``src`` that :func:`prepare_data_dir` reads (the
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


def prepare_data_dir(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    sample_rate: int,
    max_missing_fraction: float,
    num_targets: int = 0,
) -> dict:
    """Validate the Kaldi data dir ``src`` and write the normalised prepared dir ``dst``.

    All checks run before anything is written: the tables (:func:`read_data_dir`), the
    targets (:func:`read_targets_with_places`: ids in ``[0, num_targets)`` when
    ``data.num_targets`` is set), the audio headers (:func:`check_audio`). Utterances
    without targets are skipped and counted, as Kaldi's ``get_egs.sh`` does (it warns per
    utterance); more than ``max_missing_fraction`` of them is an error.

    ``dst`` gets ``wav.scp`` (recordings still used; plain paths made absolute), ``utt2spk``,
    ``spk2utt``, ``utt2uniq`` (the source's, or the identity: every utterance its own
    source, which is what Kaldi assumes without one), ``targets.ark`` + ``targets.scp``
    (binary int32 vectors), ``origin`` (:class:`Origin`), ``segments``, ``text`` and
    ``reco2file_and_channel`` when ``src`` has them, and ``report.json``. Returns the report.

    Atomic: the files are built in a temporary directory beside ``dst`` that replaces
    ``dst`` at the end; on any error ``dst`` keeps no prepared file at all (no stale
    ``text`` beside a failed preparation).
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise DataError(f"{dst}: the prepared dir must differ from the source dir")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent))
    try:
        report = _prepare_into(src, tmp, dst, sample_rate, max_missing_fraction, num_targets)
        _replace_dir(tmp, dst)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_prepared(dst)
        raise
    return report


def _remove_prepared(dst: Path) -> None:
    for name in PREPARED_FILES:
        with contextlib.suppress(FileNotFoundError):
            (dst / name).unlink()


def _replace_dir(tmp: Path, dst: Path) -> None:
    """Move the finished ``tmp`` to ``dst``: prepared files of ``dst`` are dropped, other
    entries (none are expected) kept; ``tmp`` is renamed in one step when ``dst`` is gone
    or empty."""
    _remove_prepared(dst)
    with contextlib.suppress(FileNotFoundError, OSError):
        dst.rmdir()  # only if empty
    if not dst.exists():
        os.replace(tmp, dst)
        return
    for f in sorted(tmp.iterdir(), key=lambda p: p.name == "report.json"):
        os.replace(f, dst / f.name)  # report.json last: it marks completion
    tmp.rmdir()


def _prepare_into(
    src: Path,
    out: Path,
    dst: Path,
    sample_rate: int,
    max_missing_fraction: float,
    num_targets: int,
) -> dict:
    """Check ``src`` and write the prepared files into ``out`` (which becomes ``dst``)."""
    data = read_data_dir(src)
    targets_file = find_targets_file(src)
    targets, places = read_targets_with_places(targets_file, num_targets)
    audio = check_audio(data, sample_rate)

    utts = data.utterances
    missing = [u for u in utts if u not in targets]
    kept = [u for u in utts if u in targets]
    fraction = len(missing) / len(utts)
    if not kept or fraction > max_missing_fraction:
        raise DataError(
            f"{targets_file}: {len(missing)} of {len(utts)} utterances "
            f"({100 * fraction:.1f}%) have no targets, more than "
            f"data.max_missing_targets_fraction = {max_missing_fraction}; first: "
            f"{_first(missing)}"
        )
    for utt in missing:
        log.warning("%s: no targets for utterance %s, skipping it", targets_file, utt)
    for msg in data.warnings:
        log.warning("%s", msg)
    extra = sorted(set(targets) - set(utts))

    kept_set = set(kept)
    recos = sorted({data.recording(u) for u in kept})

    def wav_value(reco: str) -> str:
        rx = data.wav[reco]
        if rx.kind == "file":
            return str(Path(rx.target).resolve())
        if rx.kind == "offset":
            return f"{Path(rx.target).resolve()}:{rx.offset}"
        return rx.text

    write_table(out / "wav.scp", ((r, wav_value(r)) for r in recos))
    write_table(out / "utt2spk", ((u, data.utt2spk[u]) for u in kept))
    spk2utt = {}
    for spk, spk_utts in data.spk2utt.items():
        mine = [u for u in spk_utts if u in kept_set]
        if mine:
            spk2utt[spk] = mine
    write_table(out / "spk2utt", ((s, " ".join(us)) for s, us in spk2utt.items()))
    uniq = data.utt2uniq or {}
    write_table(out / "utt2uniq", ((u, uniq.get(u, u)) for u in kept))
    if data.segments is not None:
        write_table(out / "segments", ((u, data.segments[u].text) for u in kept))
    if data.text is not None:
        write_table(out / "text", ((u, data.text[u]) for u in kept if u in data.text))
    if data.reco2file_and_channel is not None:
        r2fc = data.reco2file_and_channel
        write_table(out / "reco2file_and_channel", ((r, r2fc[r]) for r in recos if r in r2fc))
    write_ark_scp(
        ((u, targets[u]) for u in kept),
        out / "targets.ark",
        out / "targets.scp",
        scp_ark_path=dst / "targets.ark",
    )
    seg_file = src / "segments"
    origin = Origin(
        wav_scp=str((src / "wav.scp").resolve()),
        segments=str(seg_file.resolve()) if data.segments is not None else None,
        targets=str(targets_file.resolve()),
        wav_line={u: data.wav_lines[data.recording(u)] for u in kept},
        segment_line={u: data.segments[u].lineno for u in kept} if data.segments else {},
        targets_place={u: places[u] for u in kept},
    )
    origin.write(out, kept)

    frames = int(sum(targets[u].size for u in kept))
    report = {
        "source": str(src.resolve()),
        "source_files": origin.files(),
        "targets_source": str(targets_file.resolve()),
        "sample_rate": sample_rate,
        "num_recordings": len(recos),
        "num_utterances": len(utts),
        "num_utterances_kept": len(kept),
        "num_speakers": len(spk2utt),
        "num_missing_targets": len(missing),
        "missing_targets_fraction": round(fraction, 6),
        "skipped_utterances": missing,
        "num_targets_without_utterance": len(extra),
        "num_target_frames": frames,
        "num_targets_configured": num_targets,
        "max_target": int(max(int(targets[u].max()) for u in kept)),
        "duration_s_checked": audio["duration_s"],
        "unchecked_pipe_recordings": len(audio["unchecked_pipes"]),
        "has_segments": data.segments is not None,
        "has_text": data.text is not None,
        "has_utt2uniq": data.utt2uniq is not None,
        "warnings": data.warnings,
    }
    write_json_atomic(out / "report.json", report)
    log.info(
        "prepared %s -> %s: %d of %d utterances kept, %d speakers, %d target frames",
        src,
        dst,
        len(kept),
        len(utts),
        len(spk2utt),
        frames,
    )
    return report


# ------------------------------------------------------------------------------ feature lengths
def check_target_lengths(
    prepared: str | os.PathLike,
    utt2num_frames: Mapping[str, int],
    tolerance: int,
) -> dict:
    """Kaldi's ``nnet3-get-egs`` length rule, right after the features exist: every
    utterance with features has targets with ``|len(targets) - T| <= tolerance``
    (``egs.targets_length_tolerance``). The error names the utterance and its place in
    the user's targets file (through the prepared dir's :class:`Origin`)."""
    prepared = Path(prepared)
    origin = read_origin(prepared)
    lengths = {key: vec.size for key, vec, _ in iter_int_vectors(prepared / "targets.scp")}
    worst = 0
    for utt, frames in utt2num_frames.items():
        if utt not in lengths:
            continue
        diff = lengths[utt] - frames
        if abs(diff) > tolerance:
            src = (
                origin.targets_of(utt)
                if origin
                else f"{prepared / 'targets.scp'}: utterance {utt!r}"
            )
            raise DataError(
                f"{src}: {lengths[utt]} targets but {frames} feature frames; at most "
                f"{tolerance} frames of difference are allowed "
                "(egs.targets_length_tolerance): is this alignment of this audio, "
                "made with the same frame shift?"
            )
        worst = max(worst, abs(diff))
    return {"max_target_length_difference": worst, "targets_length_tolerance": tolerance}


def record_checked_sets(reports: Mapping[str, str], out: str | Path) -> None:
    """Write ``out``: the configured sets, each with the report :func:`prepare_data_dir`
    wrote after every check passed. The file is the gate every feature job waits for
    (rule ``check_data_sets``); its content only documents it."""
    sets = {name: str(path) for name, path in sorted(reports.items())}
    write_json_atomic(out, {"sets": sets})
    log.info("checked sets: %s", ", ".join(sets))
