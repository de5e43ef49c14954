"""Reading audio of a Kaldi data dir: files, ``cmd |`` pipes, WAVs inside arks, segments.

Mirrors what Kaldi's ``featbin/compute-mfcc-feats.cc`` (through ``WaveHolder``) and
``featbin/extract-segments.cc`` read:

* a ``wav.scp`` value ``<rxfilename>`` is classified by Kaldi's ``ClassifyRxfilename``
  (:mod:`paravg.kaldi_io`): a value ending in ``|`` is a pipe (a shell command whose stdout
  is a WAV file; Kaldi runs it with ``popen``, and so do we: a wav.scp is code),
  ``<file>:<byte offset>`` a WAV stored in a file (``wav-copy`` output; ``cmd |:0`` is
  the file named ``cmd |``, never run), anything else a plain path;
* a ``segments`` line ``<utt> <recording> <start s> <end s>`` (:class:`Segment`) cuts a
  recording as ``extract-segments.cc`` does: ``start_samp = int(start * rate)``,
  ``end_samp = int(end * rate)``, ``end = -1`` meaning "to the end"; an end that
  overshoots the recording by less than ``MAX_OVERSHOOT_S`` (0.5 s) is truncated, more is
  an error (Kaldi skips with a warning; we stop, because a data dir with such segments is
  usually a wrong wav.scp).

Audio is checked cheaply before any heavy work (:func:`check_audio`: ``soundfile.info``
plus a RIFF header walk for plain files, which catches unreadable, truncated, wrong-rate
and multi-channel files); pipe entries are checked for syntax only, because running them
is the same cost as reading the audio: the feature stage runs them (:class:`AudioReader`)
and applies the same checks (rate, channels, segment range) to what they return, before it
computes anything for that utterance.

Audio is returned at int16 scale (Kaldi's ``WaveData`` convention: a 16-bit sample keeps its
integer value); other sample formats are converted by ``soundfile`` to [-1, 1) and scaled by
32768, which equals Kaldi for 16-bit PCM and keeps the extra precision of 24/32-bit files.

The data dir itself (its tables, their checks) is :mod:`paravg.data`, which imports this
module; this one reads a data dir only through :class:`DataDirAudio`.
"""

from __future__ import annotations

import io
import os
import re
import struct
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import soundfile

from paravg.errors import DataError
from paravg.kaldi_io import RxFilename, parse_rxfilename, read_object

MAX_OVERSHOOT_S = 0.5  # extract-segments --max-overshoot default
INT16_SCALE = 32768.0


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
    if rx.kind == "file" and not os.path.exists(rx.target):
        if _AUDIO_RANGE.match(rx.target):
            raise DataError(f"{prefix}{value!r}: ark ranges '[...]' are not supported for audio")
        if any(c.isspace() for c in rx.target):
            raise DataError(
                f"{prefix}{value!r} contains whitespace but is not a pipe (a pipe ends with '|')"
            )
    return rx


# ------------------------------------------------------------------------------ segments
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


# ------------------------------------------------------------------------------ data dirs
class DataDirAudio(Protocol):
    """What :class:`AudioReader` and :func:`check_audio` read of a data dir: a
    :class:`paravg.data.DataDir` (named here as a protocol, because :mod:`paravg.data`
    imports this module)."""

    path: Path
    wav: dict[str, RxFilename]
    wav_lines: dict[str, int]
    utt2spk: dict[str, str]

    @property
    def utterances(self) -> list[str]: ...

    def recording(self, utt: str) -> str: ...

    def segment(self, utt: str) -> Segment | None: ...

    def where(self, utt: str) -> str: ...


# ------------------------------------------------------------------------------ audio
@dataclass(frozen=True)
class AudioInfo:
    num_samples: int
    sample_rate: int
    channels: int


def _wav_declared_data_bytes(path: str) -> tuple[int, int] | None:
    """(declared data-chunk bytes, bytes present after its header) of a RIFF/WAVE file."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        size = os.path.getsize(path)
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
    # path strings, not Path objects: pathlib interns every name it parses, which a
    # corpus's recordings would grow without bound (one interned name per file)
    path = rx.target
    if not os.path.isfile(path):
        raise DataError(
            f"{where}: audio file {rx.target!r} does not exist (relative paths are resolved "
            f"against the working directory {os.getcwd()})"
        )
    try:
        info = soundfile.info(path)
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
        if not os.path.isfile(rx.target):
            raise DataError(f"{where}: audio file {rx.target!r} does not exist")
        rate, samples = _decode(rx.target, where, repr(rx.target))
    if samples.ndim == 2 and samples.shape[1] == 1:
        samples = samples[:, 0]
    return rate, np.ascontiguousarray(samples)


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

    def __init__(self, data: DataDirAudio, sample_rate: int | None):
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


def check_audio_rows(
    rows: Iterable[tuple[str, str, int, RxFilename, Segment | None]],
    sample_rate: int,
    wav_file: Path,
    seg_file: Path | None,
    recordings_in_order: bool = True,
) -> dict:
    """Header-check every recording of ``rows`` and every segment's range, as the rows
    come: ``(utterance, recording, its wav.scp line, its rxfilename, segment or None)``
    in utterance order.

    Each recording's header is read once (``soundfile.info`` and the RIFF walk of
    :func:`audio_info`; pipes are not run): with ``recordings_in_order`` (a recording's
    utterances are consecutive: always without segments, and with segments whose
    recordings never decrease, Kaldi's convention) only the current recording's header
    is held, else every recording's (a table per recording). The duration is summed in
    utterance order (``extract-segments``' sample range of each segment).

    Returns ``{"duration_s": ..., "num_unchecked_pipes": recordings}``; the duration
    counts checked utterances only.
    """
    infos: dict[str, AudioInfo | None] = {}
    pipes = 0
    duration = 0.0
    for utt, reco, wav_line, rx, seg in rows:
        if reco not in infos:
            if recordings_in_order:
                infos.clear()
            where = f"{wav_file}:{wav_line}: recording {reco!r}"
            info = audio_info(rx, where)
            if info is not None:
                check_audio_format(info.sample_rate, info.channels, sample_rate, where)
            else:
                pipes += 1
            infos[reco] = info
        info = infos[reco]
        if info is None:
            continue
        duration += utterance_seconds(info, seg, seg_file, utt)
    return {"duration_s": round(duration, 3), "num_unchecked_pipes": pipes}


def utterance_seconds(info: AudioInfo, seg, seg_file, utt: str) -> float:
    """An utterance's duration: its recording's, or its segment's range checked against
    the recording (an error names ``seg_file``'s line and the utterance)."""
    if seg is None:
        return info.num_samples / info.sample_rate
    where = f"{seg_file}:{seg.lineno}: utterance {utt!r}"
    a, b = seg.sample_range(info.num_samples, info.sample_rate, where)
    return (b - a) / info.sample_rate


def check_audio(data: DataDirAudio, sample_rate: int) -> dict:
    """Header-check every recording used by ``data`` and every segment's range, of a
    data dir held in memory (:func:`check_audio_rows` streams them).

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
        duration += utterance_seconds(info, data.segment(utt), data.path / "segments", utt)
    pipes = sorted(r for r, i in infos.items() if i is None)
    return {"duration_s": round(duration, 3), "unchecked_pipes": pipes}
