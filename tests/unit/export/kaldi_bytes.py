"""Kaldi's binary encodings written by hand (``base/io-funcs-inl.h``, ``matrix/kaldi-vector.cc``,
``kaldi-matrix.cc``): the oracle the export tests compare paravg's writer with."""

from __future__ import annotations

import struct


def tok(*names: str) -> bytes:
    """Tokens, each followed by a space."""
    return b"".join(n.encode() + b" " for n in names)


def i32(v: int) -> bytes:
    return b"\x04" + struct.pack("<i", v)


def f32(v: float) -> bytes:
    return b"\x04" + struct.pack("<f", v)


def f64(v: float) -> bytes:
    return b"\x08" + struct.pack("<d", v)


def fv(values) -> bytes:
    """A float vector: ``FV``, its size, the values."""
    return tok("FV") + i32(len(values)) + struct.pack(f"<{len(values)}f", *values)


def fm(rows) -> bytes:
    """A float matrix: ``FM``, rows, columns, the values row by row."""
    flat = [v for row in rows for v in row]
    return tok("FM") + i32(len(rows)) + i32(len(rows[0])) + struct.pack(f"<{len(flat)}f", *flat)
