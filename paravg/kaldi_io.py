"""Kaldi tables and rxfilenames, once: text tables, scp files, int-vector arks, merging.

Every stage (data, features, egs, i-vectors, evaluation) reads Kaldi files through this
module, so one set of rules decides what a value in a table means.

**Rxfilenames** follow Kaldi's ``ClassifyRxfilename`` (``src/util/kaldi-io.cc``), in this
order, on the value with surrounding whitespace removed:

1. ``""`` or ``"-"``: standard input (``stdin``);
2. first character ``|``: an *output* pipe, not valid for input (``invalid``);
3. last character ``|``: an input **pipe**, ``cmd |``: the only form that runs a command;
4. starting with ``a`` or ``s``, containing ``:`` and parsing as an rspecifier/wspecifier
   (``ark:...``, ``scp,p:...``): a table specifier where a file was meant (``invalid``);
5. ending in ``:<digits>``: an **offset** into a file, ``name:offset``; the name may hold
   any character, so ``cmd |:0`` is byte 0 of the *file* named ``cmd |``, never a command;
6. a ``|`` anywhere else: "pipe symbol in the wrong place" (``invalid``);
7. anything else: a plain **file**.

Every Kaldi object paravg reads (features, i-vectors, targets: in the data, feature, egs,
i-vector, decoding, scoring and graph stages) is read here (:func:`load_scp`,
:func:`iter_int_vectors`, :func:`read_object`), from files opened here, never through
``kaldiio``'s name-based openers (which run ``cmd |`` names and unpickle ``PKL`` objects):
only what Kaldi itself writes is accepted, i.e. WAV data (``RIFF``), binary objects
(``\\0B``: matrices ``FM``/``DM``/``CM*``, vectors ``FV``/``DV``, int32 vectors) and text
matrices.

**Text tables** (``utt2spk``, ``wav.scp``, ``*.scp``, ...) are ``<key> <value...>`` lines;
Kaldi requires unique keys in ``LC_ALL=C`` order (Python's ``str`` order) and no empty
lines. Errors name the file and the 1-based line.

**Int-vector arks** (``ali-to-pdf`` output) are read with a vectorised parser of Kaldi's
``WriteIntegerVector`` layout (``util/kaldi-io-inl.h``): ``\\0B \\x04 <int32 n>`` then n
times ``\\x04 <int32 value>``; text arks are ``<key> <int> <int> ...`` lines.
"""

from __future__ import annotations

import os
import re
import struct
from collections import OrderedDict
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from paravg.errors import DataError
from paravg.io import atomic_path

__all__ = [
    "InStepScp",
    "Place",
    "RxFilename",
    "ScpTable",
    "TableLine",
    "classify_rxfilename",
    "int32_vector_bytes",
    "iter_int_vectors",
    "iter_scp",
    "iter_table",
    "load_scp",
    "merge_scps",
    "parse_rxfilename",
    "read_int_table",
    "read_object",
    "read_table",
    "table_dict",
    "write_ark_scp",
    "write_table",
]


# ------------------------------------------------------------------------------ places
@dataclass(frozen=True)
class Place:
    """Where something is in a user's file: a 1-based line, or a byte offset (binary ark)."""

    path: str
    line: int = 0
    byte: int = -1

    def __str__(self) -> str:
        if self.byte >= 0:
            return f"{self.path}: byte {self.byte}"
        return f"{self.path}:{self.line}" if self.line else self.path

    def token(self) -> str:
        """A space-free token of the position alone: ``12`` (line) or ``@4096`` (byte)."""
        return f"@{self.byte}" if self.byte >= 0 else str(self.line)

    @classmethod
    def from_token(cls, path: str, token: str) -> Place:
        if token.startswith("@"):
            return cls(path, byte=int(token[1:]))
        return cls(path, line=int(token))


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
    return list(
        iter_table(
            path, num_fields=num_fields, min_fields=min_fields, require_sorted=require_sorted
        )
    )


def iter_table(
    path: str | os.PathLike,
    *,
    num_fields: int | None = None,
    min_fields: int = 2,
    require_sorted: bool = True,
    keys: Container[str] | None = None,
) -> Iterator[TableLine]:
    """The lines of a Kaldi table as :func:`read_table` checks them, read line by line.

    With ``keys``, only the lines of those keys are yielded, and only they are checked
    for duplicates (every line is still checked for its fields and order): what the
    caller holds grows with the keys it asked for, not with the file, as Kaldi's
    ``RandomAccessTableReader`` of a sorted scp reads only the lines it is asked for.
    A sorted table (``require_sorted``) is checked holding one key (a duplicate is the
    previous line's key); one that may be unsorted is checked so while its keys ascend,
    and from its first key out of order holds each kept key's line number (those before
    it read again).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: missing file")
    # unsorted tables from their first key out of order: the lines of the keys kept
    seen: dict[str, int] | None = None
    prev_key: str | None = None
    prev_lineno = run_start = 0
    with open(path, "rb") as f:
        for lineno, bline in enumerate(f, start=1):
            if lineno == 1:
                check_no_byte_order_mark(bline, path)
            if bline.endswith(b"\n"):
                bline = bline[:-1]
            if not bline.strip():
                raise DataError(f"{path}:{lineno}: empty line (Kaldi tables have none)")
            try:
                text = bline.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{path}:{lineno}: not valid UTF-8 ({exc})") from exc
            parts = text.split()
            if num_fields is not None and len(parts) != num_fields:
                raise DataError(
                    f"{path}:{lineno}: expected {num_fields} fields, found {len(parts)}: {text!r}"
                )
            if len(parts) < min_fields:
                raise DataError(
                    f"{path}:{lineno}: expected at least {min_fields} fields, found "
                    f"{len(parts)}: {text!r}"
                )
            key = parts[0]
            kept = keys is None or key in keys
            if key != prev_key:
                run_start = lineno
            if not require_sorted and seen is None and prev_key is not None and key < prev_key:
                seen = _kept_lines_before(path, lineno, keys)
            # ascending: a duplicate is the previous line's key (nothing held per key)
            first = (run_start if key == prev_key else None) if seen is None else seen.get(key)
            if kept and first is not None:
                raise DataError(f"{path}:{lineno}: duplicate key {key!r} (first on line {first})")
            if require_sorted and prev_key is not None and key < prev_key:
                # out of order; a duplicate of an earlier line is named as such (as when
                # every key was held), found by reading the lines before this one again
                first = _first_line_of(path, key, lineno) if kept else None
                if first is not None:
                    raise DataError(
                        f"{path}:{lineno}: duplicate key {key!r} (first on line {first})"
                    )
                raise DataError(
                    f"{path}:{lineno}: not sorted: key {key!r} comes after {prev_key!r} "
                    f"(line {prev_lineno}); Kaldi needs LC_ALL=C order: "
                    f"LC_ALL=C sort -k1,1 -o {path} {path}"
                )
            prev_key, prev_lineno = key, lineno
            if not kept:
                continue
            if seen is not None:
                seen[key] = lineno
            yield TableLine(key, tuple(parts[1:]), lineno, text.strip()[len(key) :].strip())


def _kept_lines_before(path: Path, before: int, keys: Container[str] | None) -> dict[str, int]:
    """``{key: line}`` of the lines before line ``before`` of a table whose keys ascend
    up to there (of the ``keys`` only, when given)."""
    out: dict[str, int] = {}
    with open(path, "rb") as f:
        for lineno, bline in enumerate(f, start=1):
            if lineno >= before:
                break
            key = bline.split(maxsplit=1)[0].decode("utf-8")
            if keys is None or key in keys:
                out[key] = lineno
    return out


def _first_line_of(path: Path, key: str, before: int) -> int | None:
    """The first line before line ``before`` of a table whose key is ``key``, or None."""
    with open(path, "rb") as f:
        for lineno, bline in enumerate(f, start=1):
            if lineno >= before:
                return None
            parts = bline.split(maxsplit=1)
            if parts and parts[0].decode("utf-8", "replace") == key:
                return lineno
    return None


UTF8_BOM = b"\xef\xbb\xbf"


def check_no_byte_order_mark(raw: bytes, path: str | os.PathLike) -> None:
    """A Kaldi text file (table or text ark) starting with a UTF-8 byte-order mark (what
    some Windows editors write) is named as such: Kaldi would read the mark as part of the
    first key, which then sorts after every other key and matches no utterance."""
    if raw.startswith(UTF8_BOM):
        raise DataError(
            f"{path}:1: starts with a UTF-8 byte-order mark (bytes EF BB BF), which Kaldi "
            f"reads as part of the first key; remove it: sed -i '1s/^\\xEF\\xBB\\xBF//' {path}"
        )


def table_dict(
    path: str | os.PathLike, num_fields: int | None = 2, require_sorted: bool = False
) -> dict[str, str]:
    """``{key: rest of the line}`` of a table (two fields per line unless ``num_fields``)."""
    return {
        r.key: r.rest
        for r in iter_table(path, num_fields=num_fields, require_sorted=require_sorted)
    }


def read_int_table(path: str | os.PathLike) -> dict[str, int]:
    """``<key> <int>`` lines (e.g. ``utt2num_frames``)."""
    out = {}
    for r in iter_table(path, num_fields=2, require_sorted=False):
        try:
            out[r.key] = int(r.fields[0])
        except ValueError:
            raise DataError(
                f"{path}:{r.lineno}: {r.key}: expected an integer, got {r.fields[0]!r}"
            ) from None
    return out


def write_table(path: str | os.PathLike, rows: Iterable[tuple[str, str]]) -> None:
    """Write ``key value`` lines atomically, line by line (``rows`` may be a generator:
    nothing is held per row)."""
    with atomic_path(path) as tmp, open(tmp, "w") as f:
        for k, v in rows:
            f.write(f"{k} {v}\n")


# ------------------------------------------------------------------------------ rxfilenames
_RSPECIFIER = re.compile(
    r"^(?:(?:b|t|o|p|f|s|cs|no|np|nf|ns|ncs),)*(?:ark|scp)(?:,(?:b|t|o|p|f|s|cs|no|np|nf|ns|ncs))*:"
)
_OFFSET = re.compile(r"^(.*):(\d+)$", re.DOTALL)


def classify_rxfilename(value: str) -> str:
    """Kaldi's ``ClassifyRxfilename``: ``stdin``, ``pipe``, ``offset``, ``file`` or
    ``invalid`` (see the module docstring for the rules, applied in that order)."""
    if value in ("", "-"):
        return "stdin"
    if value[0] == "|":
        return "invalid"
    if value[-1] == "|":
        return "pipe"
    if value[0].isspace() or value[-1].isspace():
        return "invalid"
    if value[0] in "as" and ":" in value and _RSPECIFIER.match(value):
        return "invalid"
    if value[-1].isdigit() and _OFFSET.match(value):
        return "offset"
    if "|" in value:
        return "invalid"
    return "file"


@dataclass(frozen=True)
class RxFilename:
    """A classified rxfilename. ``kind`` is ``file``, ``offset`` or ``pipe``."""

    kind: str
    target: str  # path, or the shell command of a pipe
    offset: int = 0
    text: str = ""  # the original value


def parse_rxfilename(value: str, where: str = "") -> RxFilename:
    """Classify an input rxfilename; the forms Kaldi cannot read from raise a
    :class:`DataError` naming ``where`` (``file:line``)."""
    value = value.strip()
    prefix = f"{where}: " if where else ""
    kind = classify_rxfilename(value)
    if kind == "stdin":
        raise DataError(f"{prefix}{value!r}: standard input cannot be used in a table")
    if kind == "pipe":
        cmd = value[:-1].strip()
        if not cmd:
            raise DataError(f"{prefix}pipe entry {value!r} has no command")
        return RxFilename("pipe", cmd, text=value)
    if kind == "offset":
        m = _OFFSET.match(value)
        return RxFilename("offset", m.group(1), int(m.group(2)), text=value)
    if kind == "file":
        return RxFilename("file", value, text=value)
    if value.startswith("|"):
        why = "is an output pipe; an input pipe ends with '|' (cmd |)"
    elif _RSPECIFIER.match(value):
        why = "is a table specifier (ark:/scp:), not a file name"
    elif "|" in value:
        why = "has a pipe symbol in the wrong place (an input pipe ends with '|': cmd |)"
    else:
        why = "has leading or trailing whitespace"
    raise DataError(f"{prefix}{value!r} {why}")


# ------------------------------------------------------------------------------ objects
_REFUSED_MAGIC = {b"PKL": "a pickled object", b"NPY": "a numpy object", b"AUDIO": "kaldiio audio"}


def read_object_at(fd: BinaryIO, where: str) -> Any:
    """Read one Kaldi object at the current position of the open binary file ``fd``:
    a matrix or vector (``\\0B`` binary or text), an int32 vector (numpy int32) or a WAV
    (``(rate, samples)``). Anything else (pickles included) is refused."""
    from kaldiio.matio import read_ascii_mat, read_matrix_or_vector
    from kaldiio.wavio import read_wav

    start = fd.tell()
    head = fd.read(5)
    fd.seek(start)
    try:
        if head[:4] == b"RIFF":
            return read_wav(fd)
        if head[:2] == b"\0B":
            if head[2:3] == b"\x04":
                return _read_int_vector_fd(fd, where)
            return read_matrix_or_vector(fd)
        for magic, what in _REFUSED_MAGIC.items():
            if head.startswith(magic):
                raise DataError(f"{where}: holds {what}, not a Kaldi object; refused")
        if not head:
            raise DataError(f"{where}: offset at or past the end of the file")
        return read_ascii_mat(fd)
    except DataError:
        raise
    except Exception as exc:  # kaldiio raises assertions and struct errors on bad data
        what = f"{type(exc).__name__}: {exc}"
        raise DataError(f"{where}: not a readable Kaldi object ({what})") from exc


def read_object(path: str | os.PathLike, offset: int = 0, where: str = "") -> Any:
    """The object at byte ``offset`` of the *file* ``path`` (never run as a command)."""
    where = where or f"{path}:{offset}"
    try:
        with open(path, "rb") as fd:
            fd.seek(offset)
            return read_object_at(fd, where)
    except FileNotFoundError:
        raise DataError(f"{where}: file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"{where}: {str(path)!r} is a directory") from None


class ScpTable(Mapping):
    """Random and sequential access to the objects of an ``.scp`` file.

    Values must be offsets (``ark:offset``) or plain files; a pipe (``cmd |``) is refused
    with an error naming the line: only ``wav.scp`` entries are ever run. At most
    ``max_open`` archives stay open. With ``keys``, only those keys' lines are kept (the
    file is streamed: a job that needs a slice of a corpus's scp holds that slice).
    """

    def __init__(
        self, path: str | os.PathLike, max_open: int = 4, keys: Container[str] | None = None
    ):
        self._open: OrderedDict[str, BinaryIO] = OrderedDict()
        self.path = str(path)
        self.max_open = max_open
        self._entries: dict[str, tuple[RxFilename, int]] = {}
        for row in iter_table(path, min_fields=2, require_sorted=False, keys=keys):
            self._add(row)

    def _add(self, row: TableLine) -> None:
        where = f"{self.path}:{row.lineno}"
        rx = parse_rxfilename(row.rest, where)
        if rx.kind == "pipe":
            raise DataError(
                f"{where}: utterance {row.key!r}: {rx.text!r} is a command; only wav.scp "
                "entries may be pipes"
            )
        self._entries[row.key] = (rx, row.lineno)

    def where(self, key: str) -> str:
        return f"{self.path}:{self._entries[key][1]}: utterance {key!r}"

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def _fd(self, name: str, where: str) -> BinaryIO:
        fd = self._open.pop(name, None)
        if fd is None:
            try:
                fd = open(name, "rb")  # noqa: SIM115 (kept open for the next entries)
            except FileNotFoundError:
                raise DataError(f"{where}: archive {name!r} does not exist") from None
            while len(self._open) >= self.max_open:
                self._open.popitem(last=False)[1].close()
        self._open[name] = fd
        return fd

    def __getitem__(self, key: str) -> Any:
        try:
            rx, _ = self._entries[key]
        except KeyError:
            raise KeyError(key) from None
        where = self.where(key)
        fd = self._fd(rx.target, where)
        fd.seek(rx.offset if rx.kind == "offset" else 0)
        return read_object_at(fd, where)

    def close(self) -> None:
        for fd in self._open.values():
            fd.close()
        self._open.clear()

    def __del__(self) -> None:
        self.close()


def iter_scp(
    path: str | os.PathLike, wanted: Container[str] | None = None
) -> Iterator[tuple[str, str, Any]]:
    """``(key, where, object)`` of each line of an scp (of the ``wanted`` keys; every
    line is checked as :class:`ScpTable` checks it) in file order, the file read line by
    line: only one line's index is held (a pass over a corpus's targets or i-vectors that
    keeps nothing per utterance)."""
    table = ScpTable(path, keys=())
    try:
        for row in iter_table(path, min_fields=2, require_sorted=False):
            table._add(row)
            if wanted is None or row.key in wanted:
                yield row.key, table.where(row.key), table[row.key]
            del table._entries[row.key]
    finally:
        table.close()


class InStepScp:
    """Lookups of an scp in ascending key order, answered by reading the file in step
    (one line held), as a Kaldi sequential reader with a sorted ``spk2utt``: ``get(key)``
    gives the object or None when the file has no such key. A lookup out of order, or
    a file out of order, turns it into an :class:`ScpTable` of the whole file (what
    random access holds), which answers the rest."""

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        self._table = ScpTable(path, keys=())  # every line checked, none held
        self._last: str | None = None
        self._index: ScpTable | None = None
        try:  # whether the file is sorted (one key held)
            for _ in iter_table(path, min_fields=2):
                pass
        except DataError as exc:
            if ": not sorted: " not in str(exc):
                raise
            self._whole()  # a file out of order: random access
        self._rows = iter_table(path, min_fields=2)
        self._row: TableLine | None = None if self._index else next(self._rows, None)

    def _next(self) -> TableLine | None:
        return next(self._rows, None)

    def _whole(self) -> ScpTable:
        if self._index is None:
            self._table.close()
            self._index = ScpTable(self.path)
        return self._index

    def get(self, key: str) -> Any:
        if self._index is None and self._last is not None and key <= self._last:
            self._whole()
        self._last = key
        while self._index is None and self._row is not None and self._row.key < key:
            self._row = self._next()
        if self._index is not None:
            return self._index.get(key)
        if self._row is None or self._row.key != key:
            return None
        self._table._add(self._row)
        try:
            return self._table[key]
        finally:
            del self._table._entries[key]

    def close(self) -> None:
        self._table.close()
        if self._index is not None:
            self._index.close()


def load_scp(path: str | os.PathLike, keys: Container[str] | None = None) -> ScpTable:
    """An :class:`ScpTable` of ``path`` (the one scp reader of paravg); with ``keys``,
    of those keys' lines only."""
    return ScpTable(path, keys=keys)


# ------------------------------------------------------------------------------ int vectors
_INT_VEC_DTYPE = np.dtype([("size", "u1"), ("value", "<i4")])


def _parse_int_vector(buf: bytes, pos: int, where: str) -> tuple[np.ndarray, int]:
    """A binary int32 vector at ``buf[pos:]`` (after ``\\0B``); returns it and the end."""
    if buf[pos : pos + 1] != b"\x04":
        kind = buf[pos : pos + 3]
        raise DataError(
            f"{where}: expected an int32 vector (ali-to-pdf output), found object type {kind!r}"
        )
    if pos + 5 > len(buf):
        raise DataError(f"{where}: truncated int32 vector header")
    (n,) = struct.unpack_from("<i", buf, pos + 1)
    pos += 5
    end = pos + 5 * n
    if n < 0 or end > len(buf):
        raise DataError(f"{where}: truncated int32 vector (length {n})")
    items = np.frombuffer(buf, dtype=_INT_VEC_DTYPE, count=n, offset=pos)
    if n and not np.all(items["size"] == 4):
        raise DataError(f"{where}: corrupt int32 vector (bad element size bytes)")
    return items["value"].astype(np.int32), end


def _read_int_vector_fd(fd: BinaryIO, where: str) -> np.ndarray:
    head = fd.read(7)
    if len(head) < 7:
        raise DataError(f"{where}: truncated int32 vector header")
    (n,) = struct.unpack_from("<i", head, 3)
    body = fd.read(5 * max(n, 0))
    vec, _ = _parse_int_vector(head[2:] + body, 0, where)
    return vec


def _parse_text_ints(tokens: list[str], where: str) -> np.ndarray:
    try:
        return np.array([int(t) for t in tokens], dtype=np.int64)
    except ValueError as exc:
        raise DataError(f"{where}: targets must be integers ({exc})") from exc


#: Bytes an ark is read by (:func:`_iter_ark`): its window holds this plus one entry
#: (twice while it moves on: ~0.5 MB).
ARK_CHUNK_BYTES = 1 << 18
_SPACE_OR_NEWLINE = re.compile(b"[ \n]")
_NEWLINE = re.compile(b"\n")


class _Window:
    """The part of a file being parsed: ``buf`` holds the file's bytes from offset
    ``base``, read :data:`ARK_CHUNK_BYTES` at a time as the parser needs them; what is
    before the parser's position is dropped only when more is read (one copy a chunk)."""

    def __init__(self, f: BinaryIO):
        self.f, self.base = f, 0
        first = max(ARK_CHUNK_BYTES, len(UTF8_BOM))  # the byte-order-mark check's bytes
        self.buf = f.read(first)
        self.eof = len(self.buf) < first

    def have(self, pos: int, n: int) -> int:
        """Make ``buf`` hold ``n`` bytes from ``pos`` (all that is left at the end of the
        file); returns the position's new index in ``buf``."""
        if len(self.buf) - pos >= n or self.eof:
            return pos
        rest = [self.buf[pos:]]
        self.buf = b""  # the part read is dropped before the next chunk comes
        size = len(rest[0])
        while size < n and not self.eof:
            chunk = self.f.read(max(ARK_CHUNK_BYTES, n - size))
            self.eof = not chunk
            rest.append(chunk)
            size += len(chunk)
        self.base += pos
        self.buf = b"".join(rest)
        return 0

    def search(self, pos: int, pattern: re.Pattern, start: int) -> tuple[int, int]:
        """The first match of ``pattern`` at or after index ``start`` (>= ``pos``),
        reading on until one is found or the file ends: (new ``pos``, its index or -1)."""
        while True:
            m = pattern.search(self.buf, start)
            if m is not None:
                return pos, m.start()
            if self.eof:
                return pos, -1
            seen = len(self.buf) - pos
            pos = self.have(pos, seen + 1)
            start = pos + seen


def _iter_ark(path: Path) -> Iterator[tuple[str, np.ndarray, Place]]:
    """``(key, vector, place)`` of every entry of a binary or text int-vector ark, read
    through a :class:`_Window` (one chunk and one entry in memory, never the file)."""
    name = str(path)
    with open(path, "rb") as f:
        w = _Window(f)
        check_no_byte_order_mark(w.buf, path)
        pos, lineno = 0, 1
        while True:
            while True:  # the whitespace between entries
                pos = w.have(pos, 1)
                if pos >= len(w.buf):
                    return
                c = w.buf[pos]
                if c not in b"\n \t\r":
                    break
                lineno += c == 10
                pos += 1
            pos, space = w.search(pos, _SPACE_OR_NEWLINE, pos)
            if space < 0 or w.buf[space] == 10:
                raise DataError(f"{path}:{lineno}: malformed entry (a key without targets)")
            rel = space - pos
            key = w.buf[pos:space].decode("utf-8", "replace")
            pos = w.have(pos, rel + 3 + 5)
            space = pos + rel
            if w.buf[space + 1 : space + 3] == b"\0B":
                place = Place(name, byte=w.base + pos)
                head = space + 3
                if w.buf[head : head + 1] == b"\x04" and len(w.buf) >= head + 5:
                    (n,) = struct.unpack_from("<i", w.buf, head + 1)
                    if n > 0:
                        pos = w.have(pos, rel + 3 + 5 + 5 * n)
                        space = pos + rel
                vec, pos = _parse_int_vector(w.buf, space + 3, f"{place}: utterance {key!r}")
                yield key, vec, place
            else:
                pos, newline = w.search(pos, _NEWLINE, space)
                space = pos + rel
                end = len(w.buf) if newline < 0 else newline
                tokens = w.buf[space + 1 : end].decode("utf-8", "replace").split()
                place = Place(name, line=lineno)
                yield key, _parse_text_ints(tokens, str(place)), place
                pos = end


def iter_int_vectors(path: str | os.PathLike) -> Iterator[tuple[str, np.ndarray, Place]]:
    """``(key, int vector, place in path)`` of a ``.scp``, ``.ark`` or ``.txt`` file.

    ``.ark``: binary (``ali-to-pdf ... ark:``) or text (``ark,t:``); ``.txt``: the text
    form ``utt 0 0 31 ...``; ``.scp``: ``utt <rxfilename>`` lines (offsets or files, read
    here: never run), whose place is the scp line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: missing file")
    if path.suffix == ".scp":
        yield from _iter_scp_int_vectors(path)
    elif path.suffix == ".ark":
        yield from _iter_ark(path)
    else:
        for line in iter_table(path, min_fields=2, require_sorted=False):
            place = Place(str(path), line=line.lineno)
            yield line.key, _parse_text_ints(list(line.fields), str(place)), place


def _iter_scp_int_vectors(path: Path) -> Iterator[tuple[str, np.ndarray, Place]]:
    """The vectors of an int-vector scp, each read from its archive at its offset (at
    most ``max_open`` archives open, as :class:`ScpTable`): one vector in memory at a
    time, never a whole archive."""
    open_fds: OrderedDict[str, BinaryIO] = OrderedDict()
    max_open = 4
    name = str(path)  # one string shared by every Place
    try:
        for line in iter_table(path, min_fields=2, require_sorted=False):
            place = Place(name, line=line.lineno)
            where = f"{place}: utterance {line.key!r}"
            rx = parse_rxfilename(line.rest, str(place))
            if rx.kind == "pipe":
                raise DataError(
                    f"{where}: {rx.text!r} is a command; only wav.scp entries may be pipes"
                )
            fd = open_fds.pop(rx.target, None)
            if fd is None:
                try:
                    fd = open(rx.target, "rb")  # noqa: SIM115 (kept open for the next lines)
                except (FileNotFoundError, IsADirectoryError):
                    raise DataError(f"{where}: archive {rx.target} does not exist") from None
                while len(open_fds) >= max_open:
                    open_fds.popitem(last=False)[1].close()
            open_fds[rx.target] = fd
            yield line.key, _vector_at(fd, rx.offset, f"{where} ({rx.text})"), place
    finally:
        for fd in open_fds.values():
            fd.close()


def _vector_at(fd: BinaryIO, offset: int, where: str) -> np.ndarray:
    """The int vector at byte ``offset`` of the open archive ``fd``: binary (``\\0B``)
    or the text form up to the end of its line; only its own bytes are read."""
    if offset >= os.fstat(fd.fileno()).st_size:
        raise DataError(f"{where}: offset past the end of the file")
    fd.seek(offset)
    if fd.read(2) == b"\0B":
        head = fd.read(5)
        if head[:1] == b"\x04" and len(head) == 5:
            (n,) = struct.unpack_from("<i", head, 1)
            head += fd.read(5 * n) if n > 0 else b""
        vec, _ = _parse_int_vector(head, 0, where)
        return vec
    fd.seek(offset)
    text = fd.readline().rstrip(b"\n").decode("utf-8", "replace")
    return _parse_text_ints(text.split(), where)


def int32_vector_bytes(vec: np.ndarray) -> bytes:
    """Kaldi's binary int32 vector (``WriteIntegerVector``), vectorised: ``\\0B\\x04 <n>``
    then ``\\x04 <value>`` per element."""
    items = np.empty(vec.size, dtype=_INT_VEC_DTYPE)
    items["size"] = 4
    items["value"] = vec
    return b"\0B\x04" + struct.pack("<i", vec.size) + items.tobytes()


# ------------------------------------------------------------------------------ writing
def write_ark_scp(
    items: Iterable[tuple[str, np.ndarray]],
    ark: str | os.PathLike,
    scp: str | os.PathLike,
    compression_method: int | None = None,
    scp_ark_path: str | os.PathLike | None = None,
    absolute: bool = True,
) -> int:
    """Write ``(key, array)`` pairs as a binary Kaldi ark plus its scp, atomically.

    float32/float64 matrices become ``FM``/``DM`` (or Kaldi's compressed matrix with
    ``compression_method``, kaldiio's numbering of ``CompressionMethod``), int32 vectors
    Kaldi's integer vectors. The scp names the absolute path of ``ark`` (as Kaldi's
    ``make_mfcc.sh`` does), or ``scp_ark_path`` when the ark will be moved there; with
    ``absolute=False`` that path as given (relative paths stay relative, as kaldiio's
    ``WriteHelper("ark,scp:…")`` writes them). The ark is renamed into place before the
    scp, so an scp never names an incomplete ark. Returns the number of items written.
    """
    from kaldiio.matio import write_array

    ark, scp = Path(ark), Path(scp)
    named = Path(scp_ark_path) if scp_ark_path else ark
    ark_abs = named.resolve() if absolute else named
    n = 0
    # the scp is written beside the ark, line by line (nothing held per item), and
    # renamed after it: the ark's context is the inner one
    with (
        atomic_path(scp) as tmp_scp,
        open(tmp_scp, "w") as scp_fd,
        atomic_path(ark) as tmp_ark,
        open(tmp_ark, "wb") as fd,
    ):
        for key, array in items:
            if not key or any(c.isspace() for c in key):
                raise ValueError(f"{ark}: invalid key {key!r}")
            fd.write(key.encode("utf-8") + b" ")
            scp_fd.write(f"{key} {ark_abs}:{fd.tell()}\n")
            if array.dtype == np.int32 and array.ndim == 1:
                fd.write(int32_vector_bytes(array))
            else:
                write_array(fd, array, compression_method=compression_method)
            n += 1
    return n


def merge_scps(
    scps: list[str | os.PathLike], out: str | os.PathLike, *, sort: bool = False
) -> list[str]:
    """Concatenate scp files into ``out`` (``utils/combine_data.sh`` for one table).

    Keys must be unique across the inputs; with ``sort`` the lines are sorted by key,
    else each input must continue the previous one's ``LC_ALL=C`` order. Returns the keys.
    """
    rows: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for path in scps:
        part = read_table(path, min_fields=2, require_sorted=not sort)
        for r in part:
            if r.key in seen:
                raise DataError(f"{path}:{r.lineno}: key {r.key!r} is also in {seen[r.key]}")
            seen[r.key] = str(path)
        if part and rows and not sort and part[0].key <= rows[-1][0]:
            raise DataError(
                f"{path}:1: key {part[0].key!r} does not sort after the previous file's "
                f"last {rows[-1][0]!r}"
            )
        rows += [(r.key, r.rest) for r in part]
    if sort:
        rows.sort(key=lambda kv: kv[0])
    write_table(out, rows)
    return [k for k, _ in rows]
