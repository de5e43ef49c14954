"""TensorBoard event files with the standard library only: a scalar writer and a reader.

What ``torch.utils.tensorboard`` and tensorboardX write for scalars, without their
dependencies (the full ``tensorboard`` package, protobuf). An event file is a sequence of
TFRecords (TensorFlow's ``tensorflow/core/lib/io/record_writer.cc``)::

    uint64  length            (little-endian)
    uint32  masked_crc32c(length bytes)
    byte    data[length]      (one serialized ``Event`` protobuf)
    uint32  masked_crc32c(data)

with CRC-32C (Castagnoli, reflected polynomial 0x82F63B78; ``zlib.crc32`` is the other
CRC-32) masked as ``((crc >> 15 | crc << 17) + 0xA282EAD8) mod 2³²``. The ``Event``
(``tensorboard/compat/proto/event.proto``) is hand-encoded: ``wall_time`` (field 1,
double), ``step`` (field 2, int64), ``file_version`` (field 3, string, ``"brain.Event:2"``
in the first record of a file) and ``summary`` (field 5, a ``Summary`` message) whose
repeated ``value`` (field 1) each hold ``tag`` (field 1, string) and ``simple_value``
(field 2, float). TensorBoard finds files whose name contains ``tfevents``.

Each record is written by one ``write`` of its whole bytes, then flushed and fsynced, so a
crash leaves the file valid up to its last whole record; :func:`read_records` stops at a
torn tail and reports where the whole records end (the writer truncates it there before
appending). ``python -m paravg.tensorboard DIR`` prints every scalar of the event files
under DIR.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

FILE_VERSION = "brain.Event:2"
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, table-driven, one byte at a time."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC: the CRC rotated right by 15 bits plus 0xA282EAD8."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


# ------------------------------------------------------------------ protobuf encoding
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 two's complement, as protobuf encodes negatives
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field_number: int, wire_type: int) -> bytes:
    return _varint(field_number << 3 | wire_type)


def _bytes_field(field_number: int, data: bytes) -> bytes:
    return _key(field_number, 2) + _varint(len(data)) + data


def encode_event(
    step: int,
    wall_time: float,
    scalars: Mapping[str, float] | None = None,
    file_version: str | None = None,
) -> bytes:
    """One serialized ``Event``: the file version record, or ``scalars`` (tag -> value,
    stored as 32-bit floats, TensorBoard's ``simple_value``) at ``step``."""
    out = _key(1, 1) + struct.pack("<d", wall_time) + _key(2, 0) + _varint(step)
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _bytes_field(
                1, _bytes_field(1, tag.encode()) + _key(2, 5) + struct.pack("<f", float(v))
            )
            for tag, v in scalars.items()
        )
        out += _bytes_field(5, values)
    return out


def frame_record(data: bytes) -> bytes:
    """``data`` as one TFRecord: length, its masked CRC, data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", masked_crc32c(length))
        + data
        + struct.pack("<I", masked_crc32c(data))
    )


def append_records(path: str | Path, records: list[bytes], truncate_at: int | None = None) -> None:
    """Append serialized events to ``path`` as TFRecords, each by one write, flushed and
    fsynced; ``truncate_at`` first cuts a torn tail (:func:`read_records`'s ``end``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if truncate_at is not None and os.fstat(fd).st_size != truncate_at:
            os.ftruncate(fd, truncate_at)
        for data in records:
            os.write(fd, frame_record(data))
            os.fsync(fd)
    finally:
        os.close(fd)


def rewrite_records(path: str | Path, records: list[bytes]) -> None:
    """Replace ``path`` by a file of exactly ``records`` (serialized events), atomically:
    written beside it, fsynced, then renamed over it."""
    path = Path(path)
    tmp = path.with_name(".rewrite.tmp")  # no "tfevents" in it: TensorBoard skips it
    with open(tmp, "wb") as f:
        f.write(b"".join(frame_record(d) for d in records))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------ reading
def read_records(path: str | Path) -> tuple[list[bytes], int]:
    """The data of every whole, CRC-valid record of ``path`` in order, and the byte offset
    where they end (the file's size unless a crash tore the last record). A bad CRC in
    the middle is a ValueError naming the offset."""
    raw = Path(path).read_bytes()
    records, pos = [], 0
    while pos + 12 <= len(raw):
        header = raw[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", raw[pos + 8 : pos + 12])
        if masked_crc32c(header) != length_crc:
            raise ValueError(f"{path}: bad length CRC of the record at byte {pos}")
        end = pos + 12 + length + 4
        if end > len(raw):
            break  # torn tail
        data = raw[pos + 12 : pos + 12 + length]
        (data_crc,) = struct.unpack("<I", raw[end - 4 : end])
        if masked_crc32c(data) != data_crc:
            raise ValueError(f"{path}: bad data CRC of the record at byte {pos}")
        records.append(data)
        pos = end
    return records, pos


def _fields(data: bytes) -> Iterator[tuple[int, int, object]]:
    """(field number, wire type, value) of a protobuf message: ints for varints, bytes for
    length-delimited fields, raw 8/4 bytes for fixed64/fixed32."""
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = n = 0
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return n

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, data[pos : pos + 8]
            pos += 8
        elif wire == 2:
            n = varint()
            yield number, wire, data[pos : pos + n]
            pos += n
        elif wire == 5:
            yield number, wire, data[pos : pos + 4]
            pos += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


@dataclass
class Event:
    """A parsed ``Event``: its step, wall time, file version and scalars (tag -> value)."""

    step: int = 0
    wall_time: float = 0.0
    file_version: str | None = None
    scalars: dict[str, float] = field(default_factory=dict)


def decode_event(data: bytes) -> Event:
    """Parse one serialized ``Event`` (scalar summaries only; other fields are skipped)."""
    event = Event()
    for number, _, value in _fields(data):
        if number == 1:
            (event.wall_time,) = struct.unpack("<d", value)
        elif number == 2:
            event.step = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 3:
            event.file_version = value.decode()
        elif number == 5:
            for n, _, v in _fields(value):
                if n != 1:
                    continue
                tag, simple = None, None
                for vn, _, vv in _fields(v):
                    if vn == 1:
                        tag = vv.decode()
                    elif vn == 2:
                        (simple,) = struct.unpack("<f", vv)
                if tag is not None and simple is not None:
                    event.scalars[tag] = simple
    return event


def read_events(path: str | Path) -> list[Event]:
    """Every whole event of the file ``path``, in file order."""
    return [decode_event(d) for d in read_records(path)[0]]


# ------------------------------------------------------------------ writer
class EventWriter:
    """Appends scalar events to one event file; the file-version record comes first.

    ``steps`` are those already in the file (read at opening), so a caller can skip them.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            records, self._end = read_records(self.path)
            events = [decode_event(d) for d in records]
        else:
            events, self._end = [], None
        self._versioned = any(e.file_version for e in events)
        self.steps = [e.step for e in events if e.scalars]

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: float | None = None):
        """Append one event of ``scalars`` at ``step`` (whole, flushed and fsynced)."""
        now = time.time() if wall_time is None else wall_time
        records = []
        if not self._versioned:
            records.append(encode_event(0, now, file_version=FILE_VERSION))
        records.append(encode_event(step, now, scalars))
        append_records(self.path, records, truncate_at=self._end)
        self._versioned, self._end = True, None
        self.steps.append(step)


def main(argv: list[str] | None = None) -> int:
    """Print ``file step tag value`` for every scalar of the event files under a directory."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m paravg.tensorboard DIR", file=sys.stderr)
        return 2
    for path in sorted(Path(args[0]).rglob("*tfevents*")):
        for event in read_events(path):
            for tag, value in event.scalars.items():
                print(f"{path}\t{event.step}\t{tag}\t{value:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
