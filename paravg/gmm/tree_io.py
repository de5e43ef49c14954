"""Kaldi's binary ``tree`` file (a ``ContextDependency``): write, read, and load in kaldi-hmm-gmm.

Mirrors ``ContextDependency::Write`` (``src/tree/context-dep.cc``) and the EventMap
writers of ``src/tree/event-map.cc``, in binary mode (``base/io-funcs``):

    "ContextDependency " int32 N  int32 P  "ToPdf " <EventMap>  "EndContextDependency "

where a token is its text plus a space, an int32 is the byte 4 then 4 little-endian bytes,
a uint32 the byte -4 then 4 bytes, and an EventMap is one of

    "NULL "                                      (an empty table entry)
    "CE " int32 answer                           (ConstantEventMap)
    "TE " int32 key  uint32 size  "( " <size EventMaps> ") "     (TableEventMap)
    "SE " int32 key  <int vector yes_set>  "{ " <yes> <no> "} "  (SplitEventMap)

with an integer vector written as the byte 4, its length as raw int32, then its int32s
(``WriteIntegerVector``). The file is preceded by Kaldi's binary marker ``\\0B`` when
written as a Kaldi object (``WriteKaldiObject``); :func:`write_tree` does that, so
``tree-info`` and ``kaldi_hmm_gmm`` read it.
"""

from __future__ import annotations

import struct
from pathlib import Path

from paravg.gmm.event_map import ConstantEventMap, EventMap, SplitEventMap, TableEventMap

BINARY_MARKER = b"\0B"


def _token(text: str) -> bytes:
    return text.encode() + b" "


def _int32(value: int) -> bytes:
    return b"\x04" + struct.pack("<i", value)


def _uint32(value: int) -> bytes:
    return struct.pack("<b", -4) + struct.pack("<I", value)


def event_map_bytes(emap: EventMap | None) -> bytes:
    """An EventMap in Kaldi binary (``EventMap::Write``; None writes ``NULL``)."""
    if emap is None:
        return _token("NULL")
    if isinstance(emap, ConstantEventMap):
        return _token("CE") + _int32(emap.answer)
    if isinstance(emap, TableEventMap):
        body = b"".join(event_map_bytes(sub) for sub in emap.table)
        return (
            _token("TE") + _int32(emap.key) + _uint32(len(emap.table))
            + _token("(") + body + _token(")")
        )  # fmt: skip
    if isinstance(emap, SplitEventMap):
        yes_set = b"\x04" + struct.pack(f"<i{len(emap.yes_set)}i", len(emap.yes_set), *emap.yes_set)
        return (
            _token("SE") + _int32(emap.key) + yes_set + _token("{")
            + event_map_bytes(emap.yes) + event_map_bytes(emap.no) + _token("}")
        )  # fmt: skip
    raise TypeError(f"not an EventMap: {emap!r}")


def context_dependency_bytes(tree: EventMap, context_width: int, central_position: int) -> bytes:
    """The ``ContextDependency`` object in Kaldi binary, without the ``\\0B`` marker: the
    state kaldi-hmm-gmm's ``ContextDependency.__setstate__`` takes."""
    if not 0 <= central_position < context_width:
        raise ValueError(f"central position {central_position} outside width {context_width}")
    return (
        _token("ContextDependency") + _int32(context_width) + _int32(central_position)
        + _token("ToPdf") + event_map_bytes(tree) + _token("EndContextDependency")
    )  # fmt: skip


def write_tree(path: Path, tree: EventMap, context_width: int, central_position: int) -> None:
    """Write ``tree`` as a Kaldi binary tree file (as ``build-tree`` writes ``tree``)."""
    data = BINARY_MARKER + context_dependency_bytes(tree, context_width, central_position)
    tmp = Path(f"{path}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def token(self) -> str:
        end = self.data.index(b" ", self.pos)
        text, self.pos = self.data[self.pos : end].decode(), end + 1
        return text

    def expect(self, text: str) -> None:
        got = self.token()
        if got != text:
            raise ValueError(f"expected token {text!r} at byte {self.pos}, got {got!r}")

    def int32(self, signed: bool = True) -> int:
        size = struct.unpack_from("<b", self.data, self.pos)[0]
        if size != (4 if signed else -4):
            raise ValueError(f"bad integer size byte {size} at byte {self.pos}")
        value = struct.unpack_from("<i" if signed else "<I", self.data, self.pos + 1)[0]
        self.pos += 5
        return value

    def event_map(self) -> EventMap | None:
        kind = self.token()
        if kind == "NULL":
            return None
        if kind == "CE":
            return ConstantEventMap(self.int32())
        if kind == "TE":
            key, size = self.int32(), self.int32(signed=False)
            self.expect("(")
            table = tuple(self.event_map() for _ in range(size))
            self.expect(")")
            return TableEventMap(key, table)
        if kind == "SE":
            key = self.int32()
            if self.data[self.pos] != 4:
                raise ValueError(f"bad integer-vector size byte at {self.pos}")
            (n,) = struct.unpack_from("<i", self.data, self.pos + 1)
            yes_set = struct.unpack_from(f"<{n}i", self.data, self.pos + 5)
            self.pos += 5 + 4 * n
            self.expect("{")
            yes, no = self.event_map(), self.event_map()
            self.expect("}")
            return SplitEventMap(key, tuple(yes_set), yes, no)
        raise ValueError(f"unknown EventMap token {kind!r}")


def read_context_dependency(data: bytes) -> tuple[EventMap, int, int]:
    """Parse Kaldi binary tree bytes (with or without ``\\0B``): (tree, N, P)."""
    reader = _Reader(data[2:] if data.startswith(BINARY_MARKER) else data)
    reader.expect("ContextDependency")
    width, central = reader.int32(), reader.int32()
    reader.expect("ToPdf")
    tree = reader.event_map()
    reader.expect("EndContextDependency")
    return tree, width, central


def read_tree(path: Path) -> tuple[EventMap, int, int]:
    """Read a Kaldi binary tree file: (tree, context width N, central position P)."""
    return read_context_dependency(Path(path).read_bytes())


def load_kaldi_tree(path: Path):
    """A Kaldi binary tree file (ours or Kaldi's) as a ``kaldi_hmm_gmm.ContextDependency``."""
    data = Path(path).read_bytes()
    if not data.startswith(BINARY_MARKER):
        raise ValueError(f"{path}: not a Kaldi binary file (no \\0B marker)")
    return kaldi_context_dependency(data[2:])


def kaldi_context_dependency(data: bytes):
    """``kaldi_hmm_gmm.ContextDependency.__setstate__`` on binary ContextDependency bytes
    (the pickled state is the object's Kaldi binary form, as signed bytes)."""
    import kaldi_hmm_gmm

    ctx = kaldi_hmm_gmm.ContextDependency.__new__(kaldi_hmm_gmm.ContextDependency)
    ctx.__setstate__((list(struct.unpack(f"<{len(data)}b", data)),))
    return ctx
