"""Kaldi data directories: read, validate and prepare them; read their audio and targets.

A Kaldi data dir (``utils/validate_data_dir.sh``, ``utils/fix_data_dir.sh``) holds:

* ``wav.scp``   ``<recording> <rxfilename>``: a plain path, a ``cmd |`` pipe (a shell command
  whose stdout is a WAV file; Kaldi runs it with ``popen``, and so do we: a wav.scp is code),
  or ``<archive>:<byte offset>`` of a WAV stored in an ark (``wav-copy`` output).
* ``segments``  optional, ``<utt> <recording> <start s> <end s>``; ``end = -1`` means "to the
  end". Without it every recording is one utterance with the recording's id.
* ``utt2spk``   ``<utt> <speaker>``; ``spk2utt`` (``<speaker> <utt> ...``) is derived when
  missing and checked against ``utt2spk`` when present.
* ``text``      optional transcripts (copied, not used for training).
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

import io
import logging
import os
import re
import struct
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile

from paravg.io import atomic_path, write_json_atomic, write_text_atomic

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
OPTIONAL_COPIED_FILES = ("segments", "text")


class DataDirError(ValueError):
    """A data directory that does not follow Kaldi's conventions; the message names the
    file and the line or utterance, and what was expected."""


# ------------------------------------------------------------------------------ tables
@dataclass(frozen=True)
class TableLine:
    """One line of a Kaldi text table: its key, the remaining fields and its 1-based line."""

    key: str
    fields: tuple[str, ...]
    lineno: int
    rest: str  # everything after the key, stripped (wav.scp values may contain spaces)


def read_table(
    path: str | os.PathLike,
    *,
    num_fields: int | None = None,
    min_fields: int = 2,
    require_sorted: bool = True,
) -> list[TableLine]:
    """Read a whitespace-separated Kaldi table, checking Kaldi's invariants.

    ``num_fields`` (key included) is the exact field count when given, else at least
    ``min_fields``. Keys must be unique and, when ``require_sorted``, in ``LC_ALL=C``
    order (``utils/validate_data_dir.sh`` checks ``sort -k1,1 -u`` equality).
    """
    path = Path(path)
    if not path.is_file():
        raise DataDirError(f"{path}: missing file")
    raw = path.read_bytes()
    lines: list[TableLine] = []
    seen: dict[str, int] = {}
    prev: TableLine | None = None
    for lineno, bline in enumerate(raw.split(b"\n"), start=1):
        if not bline.strip():
            if lineno == raw.count(b"\n") + 1 and not bline:
                break  # the empty string after the final newline
            raise DataDirError(f"{path}:{lineno}: empty line (Kaldi tables have none)")
        try:
            text = bline.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataDirError(f"{path}:{lineno}: not valid UTF-8 ({exc})") from exc
        parts = text.split()
        if num_fields is not None and len(parts) != num_fields:
            raise DataDirError(
                f"{path}:{lineno}: expected {num_fields} fields, found {len(parts)}: {text!r}"
            )
        if len(parts) < min_fields:
            raise DataDirError(
                f"{path}:{lineno}: expected at least {min_fields} fields, found "
                f"{len(parts)}: {text!r}"
            )
        key = parts[0]
        if key in seen:
            raise DataDirError(
                f"{path}:{lineno}: duplicate key {key!r} (first on line {seen[key]})"
            )
        if require_sorted and prev is not None and key < prev.key:
            raise DataDirError(
                f"{path}:{lineno}: not sorted: key {key!r} comes after {prev.key!r} "
                f"(line {prev.lineno}); Kaldi needs LC_ALL=C order: "
                f"LC_ALL=C sort -k1,1 -o {path} {path}"
            )
        seen[key] = lineno
        entry = TableLine(key, tuple(parts[1:]), lineno, text.strip()[len(key) :].strip())
        lines.append(entry)
        prev = entry
    return lines


def write_table(path: str | os.PathLike, rows: Iterable[tuple[str, str]]) -> None:
    """Write ``key value`` lines atomically."""
    write_text_atomic(path, "".join(f"{k} {v}\n" for k, v in rows))


# ------------------------------------------------------------------------------ rxfilenames
@dataclass(frozen=True)
class RxFilename:
    """A parsed wav.scp value. ``kind`` is ``file``, ``pipe`` or ``ark`` (WAV at an offset)."""

    kind: str
    target: str  # path, shell command, or ark path
    offset: int = 0
    text: str = ""  # the original value


_ARK_OFFSET = re.compile(r"^(.*\S):(\d+)$")
_ARK_RANGE = re.compile(r"^(.*\S):(\d+)\[.*\]$")


def parse_rxfilename(value: str, where: str = "") -> RxFilename:
    """Classify a Kaldi rxfilename (``util/kaldi-io.h``: ClassifyRxfilename).

    Supported: ``cmd |`` (run by the shell), ``path`` and ``path:offset`` (an ark holding a
    WAV). Rejected with an error: ``-`` (stdin), ``| cmd`` (an output pipe) and
    ``path:offset[range]`` (matrix ranges are not audio).
    """
    value = value.strip()
    prefix = f"{where}: " if where else ""
    if not value:
        raise DataDirError(f"{prefix}empty rxfilename")
    if value.endswith("|"):
        cmd = value[:-1].strip()
        if not cmd:
            raise DataDirError(f"{prefix}pipe entry {value!r} has no command")
        return RxFilename("pipe", cmd, text=value)
    if value.startswith("|"):
        raise DataDirError(
            f"{prefix}{value!r} is an output pipe; an input pipe ends with '|' (cmd |)"
        )
    if value == "-":
        raise DataDirError(f"{prefix}'-' (standard input) cannot be used in a wav.scp")
    if _ARK_RANGE.match(value) and not Path(value).exists():
        raise DataDirError(f"{prefix}{value!r}: ark ranges '[...]' are not supported for audio")
    m = _ARK_OFFSET.match(value)
    if m and not Path(value).exists():
        return RxFilename("ark", m.group(1), int(m.group(2)), text=value)
    if " " in value or "\t" in value:
        raise DataDirError(
            f"{prefix}{value!r} contains whitespace but is not a pipe (a pipe ends with '|')"
        )
    return RxFilename("file", value, text=value)


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
            raise DataDirError(
                f"{prefix}segment starts at {self.start}s but recording {self.recording!r} "
                f"is {dur:.3f}s long"
            )
        if end > num_samples:
            if end >= num_samples + int(MAX_OVERSHOOT_S * rate):
                raise DataDirError(
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

    @property
    def utterances(self) -> list[str]:
        """Utterance ids in ``LC_ALL=C`` order."""
        return sorted(self.utt2spk)

    def recording(self, utt: str) -> str:
        return self.segments[utt].recording if self.segments is not None else utt

    def segment(self, utt: str) -> Segment | None:
        return self.segments[utt] if self.segments is not None else None

    def where(self, utt: str) -> str:
        """'file:line' of the wav.scp entry an utterance comes from, for error messages."""
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
        raise DataDirError(f"{path}: data directory does not exist")
    wav_file = path / "wav.scp"
    wav: dict[str, RxFilename] = {}
    wav_lines: dict[str, int] = {}
    for line in read_table(wav_file):
        wav[line.key] = parse_rxfilename(line.rest, f"{wav_file}:{line.lineno}")
        wav_lines[line.key] = line.lineno

    u2s_file = path / "utt2spk"
    utt2spk = {line.key: line.fields[0] for line in read_table(u2s_file, num_fields=2)}
    if not utt2spk:
        raise DataDirError(f"{u2s_file}: no utterances")

    segments = None
    seg_file = path / "segments"
    if seg_file.exists():
        segments = {}
        for line in read_table(seg_file, min_fields=4):
            where = f"{seg_file}:{line.lineno}"
            if len(line.fields) == 4 and line.fields[3] != "0":
                raise DataDirError(
                    f"{where}: channel field {line.fields[3]!r}: only mono audio (channel 0) "
                    "is supported"
                )
            if len(line.fields) > 4:
                raise DataDirError(f"{where}: expected 4 or 5 fields, found {len(line.fields) + 1}")
            reco, s_start, s_end = line.fields[:3]
            try:
                start, end = float(s_start), float(s_end)
            except ValueError as exc:
                raise DataDirError(
                    f"{where}: start/end times must be numbers, got {s_start!r} {s_end!r}"
                ) from exc
            if not (start >= 0 and (end == -1 or end > start)):
                raise DataDirError(
                    f"{where}: invalid segment {start} .. {end} (need 0 <= start < end, "
                    "or end = -1)"
                )
            if reco not in wav:
                raise DataDirError(f"{where}: recording {reco!r} is not in {wav_file}")
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
        raise DataDirError("utterance lists disagree; " + "; ".join(msg))

    derived: dict[str, list[str]] = {}
    for utt in sorted(utt2spk):
        derived.setdefault(utt2spk[utt], []).append(utt)
    spk2utt = {spk: derived[spk] for spk in sorted(derived)}
    s2u_file = path / "spk2utt"
    if s2u_file.exists():
        given = read_table(s2u_file, min_fields=2)
        for line in given:
            if sorted(line.fields) != spk2utt.get(line.key):
                raise DataDirError(
                    f"{s2u_file}:{line.lineno}: speaker {line.key!r} lists utterances "
                    f"{_first(line.fields)} but utt2spk gives "
                    f"{_first(spk2utt.get(line.key, []))}"
                )
        missing = set(spk2utt) - {line.key for line in given}
        if missing:
            raise DataDirError(f"{s2u_file}: speakers of utt2spk missing: {_first(missing)}")

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
            raise DataDirError(f"{text_file}: utterances not in {u2s_file}: {_first(unknown)}")

    return DataDir(path, wav, wav_lines, utt2spk, spk2utt, segments, text, warnings)


# ------------------------------------------------------------------------------ targets
def find_targets_file(path: str | os.PathLike) -> Path:
    """The targets file of a data dir: the first of ``TARGET_FILE_NAMES`` that exists."""
    path = Path(path)
    for name in TARGET_FILE_NAMES:
        if (path / name).is_file():
            return path / name
    raise DataDirError(
        f"{path}: no targets file; expected one of {', '.join(TARGET_FILE_NAMES)} holding "
        "per-frame pdf ids (Kaldi's ali.*.gz hold transition ids: convert them with "
        "ali-to-pdf final.mdl 'ark:gunzip -c ali.*.gz|' ark,t:ali.txt)"
    )


_INT_VEC_DTYPE = np.dtype([("size", "u1"), ("value", "<i4")])


def _read_binary_int_vector(buf: bytes, pos: int, where: str) -> tuple[np.ndarray, int]:
    """Parse a binary Kaldi int32 vector at ``buf[pos:]`` (after the ``\\0B`` marker).

    Layout (``util/kaldi-io-inl.h`` WriteIntegerVector): ``\\x04 <int32 n>`` then n times
    ``\\x04 <int32 value>``.
    """
    if buf[pos : pos + 1] != b"\x04":
        kind = buf[pos : pos + 3]
        raise DataDirError(
            f"{where}: expected an int32 vector (ali-to-pdf output), found object type {kind!r}"
        )
    if pos + 5 > len(buf):
        raise DataDirError(f"{where}: truncated int32 vector header")
    (n,) = struct.unpack_from("<i", buf, pos + 1)
    pos += 5
    end = pos + 5 * n
    if n < 0 or end > len(buf):
        raise DataDirError(f"{where}: truncated int32 vector (length {n})")
    items = np.frombuffer(buf, dtype=_INT_VEC_DTYPE, count=n, offset=pos)
    if n and not np.all(items["size"] == 4):
        raise DataDirError(f"{where}: corrupt int32 vector (bad element size bytes)")
    return items["value"].astype(np.int32), end


def _parse_text_int_vector(tokens: list[str], where: str) -> np.ndarray:
    try:
        return np.array([int(t) for t in tokens], dtype=np.int64)
    except ValueError as exc:
        raise DataDirError(f"{where}: targets must be integers ({exc})") from exc


def _iter_ark(
    path: Path, buf: bytes, offset: int | None = None
) -> Iterator[tuple[str, np.ndarray, str]]:
    """Iterate ``(key, vector, where)`` over the bytes ``buf`` of a binary or text
    int-vector ark ``path``. With ``offset`` (from an scp), read the single object there.
    """
    if offset is not None:
        where = f"{path}:{offset}"
        if offset > len(buf):
            raise DataDirError(f"{where}: offset past the end of the file")
        if buf[offset : offset + 2] == b"\0B":
            vec, _ = _read_binary_int_vector(buf, offset + 2, where)
            yield "", vec, where
            return
        end = buf.find(b"\n", offset)
        text = buf[offset : None if end < 0 else end].decode("utf-8", "replace")
        yield "", _parse_text_int_vector(text.split(), where), where
        return
    pos, lineno = 0, 1
    while pos < len(buf):
        while pos < len(buf) and buf[pos : pos + 1] in (b"\n", b" ", b"\t", b"\r"):
            lineno += buf[pos : pos + 1] == b"\n"
            pos += 1
        if pos >= len(buf):
            break
        space = buf.find(b" ", pos)
        newline = buf.find(b"\n", pos)
        if space < 0 or (0 <= newline < space):
            where = f"{path}:{lineno}"
            raise DataDirError(f"{where}: malformed entry (a key without targets)")
        key = buf[pos:space].decode("utf-8", "replace")
        if buf[space + 1 : space + 3] == b"\0B":
            where = f"{path}: byte {pos}: utterance {key!r}"
            vec, pos = _read_binary_int_vector(buf, space + 3, where)
            yield key, vec, where
        else:
            end = len(buf) if newline < 0 else newline
            tokens = buf[space + 1 : end].decode("utf-8", "replace").split()
            where = f"{path}:{lineno}: utterance {key!r}"
            yield key, _parse_text_int_vector(tokens, f"{path}:{lineno}"), where
            pos = end


def read_targets(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read per-frame integer targets from a ``.scp``, ``.ark`` or ``.txt`` file.

    ``.ark`` may be binary (``ali-to-pdf ... ark:``) or text (``ark,t:``); ``.txt`` is the
    text form ``utt 0 0 31 ...``; ``.scp`` lines are ``utt <ark>:<offset>``. Every vector
    must be non-empty with non-negative entries; keys must be unique.
    """
    path = Path(path)
    if not path.is_file():
        raise DataDirError(f"{path}: missing targets file")
    entries: list[tuple[str, np.ndarray, str]] = []
    arks: dict[Path, bytes] = {}
    if path.suffix == ".scp":
        for line in read_table(path, num_fields=2, require_sorted=False):
            m = _ARK_OFFSET.match(line.fields[0])
            where = f"{path}:{line.lineno}: utterance {line.key!r}"
            if not m:
                raise DataDirError(f"{where}: expected <ark>:<offset>, got {line.fields[0]!r}")
            ark = Path(m.group(1))
            if not ark.is_file():
                raise DataDirError(f"{where}: archive {ark} does not exist")
            if ark not in arks:
                arks[ark] = ark.read_bytes()
            (_, vec, _), *_ = _iter_ark(ark, arks[ark], int(m.group(2)))
            entries.append((line.key, vec, where))
    elif path.suffix == ".ark":
        entries = list(_iter_ark(path, path.read_bytes()))
    else:
        for line in read_table(path, min_fields=2, require_sorted=False):
            where = f"{path}:{line.lineno}: utterance {line.key!r}"
            entries.append(
                (
                    line.key,
                    _parse_text_int_vector(list(line.fields), f"{path}:{line.lineno}"),
                    where,
                )
            )
    out: dict[str, np.ndarray] = {}
    for key, vec, where in entries:
        if key in out:
            raise DataDirError(f"{where}: duplicate targets for this utterance")
        if vec.size == 0:
            raise DataDirError(f"{where}: empty target vector")
        if vec.min() < 0 or vec.max() > np.iinfo(np.int32).max:
            raise DataDirError(f"{where}: targets must be in [0, 2^31), got {vec.min()}")
        out[key] = vec.astype(np.int32)
    return out


# ------------------------------------------------------------------------------ ark writing
def _int32_vector_bytes(vec: np.ndarray) -> bytes:
    """Kaldi's binary int32 vector (``WriteIntegerVector``), vectorised: ``\\0B\\x04 <n>``
    then ``\\x04 <value>`` per element."""
    items = np.empty(vec.size, dtype=_INT_VEC_DTYPE)
    items["size"] = 4
    items["value"] = vec
    return b"\0B\x04" + struct.pack("<i", vec.size) + items.tobytes()


def write_ark_scp(
    items: Iterable[tuple[str, np.ndarray]],
    ark: str | os.PathLike,
    scp: str | os.PathLike,
    compression_method: int | None = None,
) -> int:
    """Write ``(key, array)`` pairs as a binary Kaldi ark plus its scp, atomically.

    float32/float64 matrices become ``FM``/``DM`` (or Kaldi's compressed matrix with
    ``compression_method``, kaldiio's numbering of ``CompressionMethod``), int32 vectors
    Kaldi's integer vectors. The scp points at the absolute path of ``ark`` (as Kaldi's
    ``make_mfcc.sh`` does), so it stays valid from any working directory. The ark is
    renamed into place before the scp, so an scp never names an incomplete ark.
    """
    from kaldiio.matio import write_array

    ark, scp = Path(ark), Path(scp)
    ark_abs = ark.resolve()
    lines = []
    n = 0
    with atomic_path(ark) as tmp_ark, open(tmp_ark, "wb") as fd:
        for key, array in items:
            if not key or any(c.isspace() for c in key):
                raise ValueError(f"{ark}: invalid key {key!r}")
            fd.write(key.encode("utf-8") + b" ")
            lines.append(f"{key} {ark_abs}:{fd.tell()}\n")
            if array.dtype == np.int32 and array.ndim == 1:
                fd.write(_int32_vector_bytes(array))
            else:
                write_array(fd, array, compression_method=compression_method)
            n += 1
    write_text_atomic(scp, "".join(lines))
    return n


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

    Raises :class:`DataDirError` for a missing, unreadable or truncated file.
    """
    if rx.kind == "pipe":
        return None
    if rx.kind == "ark":
        rate, samples = _read_ark_wav(rx, where)
        return AudioInfo(samples.shape[0], rate, 1 if samples.ndim == 1 else samples.shape[1])
    path = Path(rx.target)
    if not path.is_file():
        raise DataDirError(
            f"{where}: audio file {rx.target!r} does not exist (relative paths are resolved "
            f"against the working directory {os.getcwd()})"
        )
    try:
        info = soundfile.info(str(path))
    except Exception as exc:  # libsndfile raises its own error types
        raise DataDirError(f"{where}: cannot read audio {rx.target!r}: {exc}") from exc
    if info.format == "WAV":
        declared = _wav_declared_data_bytes(path)
        if declared is not None:
            want, have = declared
            if want not in (0, 0xFFFFFFFF) and have < want:
                raise DataDirError(
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
    import kaldiio

    try:
        obj = kaldiio.load_mat(f"{rx.target}:{rx.offset}")
    except Exception as exc:
        raise DataDirError(f"{where}: cannot read WAV from ark entry {rx.text!r}: {exc}") from exc
    if not isinstance(obj, tuple):
        raise DataDirError(f"{where}: ark entry {rx.text!r} is not audio")
    rate, samples = obj
    samples = np.asarray(samples)
    if np.issubdtype(samples.dtype, np.integer) and samples.dtype.itemsize == 2:
        samples = samples.astype(np.float32)
    elif np.issubdtype(samples.dtype, np.floating):
        samples = (samples * INT16_SCALE).astype(np.float32)
    else:
        raise DataDirError(f"{where}: ark entry {rx.text!r}: unsupported sample type")
    return int(rate), samples


def _decode(source, where: str, what: str) -> tuple[int, np.ndarray]:
    try:
        samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
    except Exception as exc:
        raise DataDirError(f"{where}: cannot read audio from {what}: {exc}") from exc
    return int(rate), samples * np.float32(INT16_SCALE)


def read_recording(rx: RxFilename, where: str = "") -> tuple[int, np.ndarray]:
    """Read a whole recording: ``(rate, samples)``, samples ``float32 [N]`` or ``[N, C]``
    at int16 scale. Runs a pipe entry through ``/bin/sh`` (Kaldi's ``popen``)."""
    if rx.kind == "pipe":
        proc = subprocess.run(rx.target, shell=True, capture_output=True, check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode("utf-8", "replace").strip()[-500:]
            raise DataDirError(
                f"{where}: command {rx.target!r} failed with exit status {proc.returncode}: {err}"
            )
        if not proc.stdout:
            raise DataDirError(f"{where}: command {rx.target!r} wrote no audio")
        rate, samples = _decode(io.BytesIO(_patch_streamed_wav(proc.stdout)), where, rx.text)
    elif rx.kind == "ark":
        rate, samples = _read_ark_wav(rx, where)
    else:
        if not Path(rx.target).is_file():
            raise DataDirError(f"{where}: audio file {rx.target!r} does not exist")
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
    ``extract-segments`` does. Raises :class:`DataDirError` (naming ``where``) for
    unreadable audio, a sample rate other than ``sample_rate``, more than one channel,
    or a segment out of range.
    """
    rx = entry if isinstance(entry, RxFilename) else parse_rxfilename(entry, where)
    rate, samples = read_recording(rx, where)
    check_audio_format(rate, samples.shape[1] if samples.ndim == 2 else 1, sample_rate, where)
    if segment is not None:
        a, b = segment.sample_range(samples.shape[0], rate, where)
        samples = samples[a:b]
    return samples


def check_audio_format(rate: int, channels: int, sample_rate: int | None, where: str) -> None:
    """Raise unless the audio is mono at ``sample_rate`` (when given)."""
    if sample_rate is not None and rate != sample_rate:
        raise DataDirError(
            f"{where}: sample rate {rate} Hz, expected {sample_rate} Hz (data.sample_rate); "
            f"resample it, e.g. with a pipe: sox <file> -r {sample_rate} -t wav - |"
        )
    if channels != 1:
        raise DataDirError(
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
def prepare_data_dir(
    src: str | os.PathLike,
    dst: str | os.PathLike,
    sample_rate: int,
    max_missing_fraction: float,
) -> dict:
    """Validate the Kaldi data dir ``src`` and write the normalised prepared dir ``dst``.

    All checks run before anything is written: the tables (:func:`read_data_dir`), the
    targets (:func:`read_targets`), the audio headers (:func:`check_audio`). Utterances
    without targets are skipped and counted, as Kaldi's ``get_egs.sh`` does (it warns per
    utterance); more than ``max_missing_fraction`` of them is an error.

    ``dst`` gets ``wav.scp`` (recordings still used; plain paths made absolute), ``utt2spk``,
    ``spk2utt``, ``targets.ark`` + ``targets.scp`` (binary int32 vectors), ``segments`` and
    ``text`` when ``src`` has them (stale copies are removed otherwise), and ``report.json``.
    Returns the report.
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise DataDirError(f"{dst}: the prepared dir must differ from the source dir")
    data = read_data_dir(src)
    targets_file = find_targets_file(src)
    targets = read_targets(targets_file)
    audio = check_audio(data, sample_rate)

    utts = data.utterances
    missing = [u for u in utts if u not in targets]
    kept = [u for u in utts if u in targets]
    fraction = len(missing) / len(utts)
    if not kept or fraction > max_missing_fraction:
        raise DataDirError(
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
    dst.mkdir(parents=True, exist_ok=True)

    def wav_value(reco: str) -> str:
        rx = data.wav[reco]
        if rx.kind == "file":
            return str(Path(rx.target).resolve())
        if rx.kind == "ark":
            return f"{Path(rx.target).resolve()}:{rx.offset}"
        return rx.text

    write_table(dst / "wav.scp", ((r, wav_value(r)) for r in recos))
    write_table(dst / "utt2spk", ((u, data.utt2spk[u]) for u in kept))
    spk2utt = {}
    for spk, spk_utts in data.spk2utt.items():
        mine = [u for u in spk_utts if u in kept_set]
        if mine:
            spk2utt[spk] = mine
    write_table(dst / "spk2utt", ((s, " ".join(us)) for s, us in spk2utt.items()))
    if data.segments is not None:
        write_table(
            dst / "segments",
            ((u, data.segments[u].text) for u in kept),
        )
    if data.text is not None:
        write_table(dst / "text", ((u, data.text[u]) for u in kept if u in data.text))
    for name in OPTIONAL_COPIED_FILES:
        if not (src / name).exists() and (dst / name).exists():
            (dst / name).unlink()
    write_ark_scp(((u, targets[u]) for u in kept), dst / "targets.ark", dst / "targets.scp")

    frames = int(sum(targets[u].size for u in kept))
    report = {
        "source": str(src.resolve()),
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
        "max_target": int(max(int(targets[u].max()) for u in kept)),
        "duration_s_checked": audio["duration_s"],
        "unchecked_pipe_recordings": len(audio["unchecked_pipes"]),
        "has_segments": data.segments is not None,
        "has_text": data.text is not None,
        "warnings": data.warnings,
    }
    write_json_atomic(dst / "report.json", report)
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
