"""Kaldi's object serialisation, text and binary, written and read in pure Python.

Mirrors ``src/base/io-funcs{.h,-inl.h,.cc}`` and the ``Write``/``Read`` of
``src/matrix/kaldi-vector.cc``, ``kaldi-matrix.cc`` and ``packed-matrix.cc``:

* a binary file starts with ``\\0B`` (``kaldi::Output`` with ``binary=true``); a text file
  has no header;
* token: the characters then one space (both modes);
* integer (``WriteBasicType``): binary = one signed size byte (``+4`` for int32) then the
  little-endian value; text = the number and a space;
* float/double: binary = size byte ``4``/``8`` then IEEE bytes; text = the number and a
  space (we print 9/17 significant digits, so text round-trips exactly);
* bool: ``T``/``F`` (text: and a space);
* integer vector: binary = size byte, int32 length, raw elements; text = ``[ a b ]\\n``;
* ``Vector``: binary = token ``FV``/``DV``, int32 dim, raw data; text = `` [ a b ]\\n``;
* ``Matrix``: binary = ``FM``/``DM``, int32 rows, int32 cols, raw row-major data; text =
  `` [`` then each row on its own line, ``]\\n``;
* ``SpMatrix`` (packed lower triangle, row by row): binary = ``FP``/``DP``, int32 dim, the
  ``n(n+1)/2`` values; text = ``[`` rows of the triangle ``]``.

Readers accept what Kaldi's readers accept for the files paravg writes and reads
(float or double on disk for a float object, either mode).
"""

from __future__ import annotations

import io
import struct

import numpy as np

from paravg.errors import ModelFileError

BINARY_HEADER = b"\0B"


def _f32(x: float) -> str:
    return f"{float(np.float32(x)):.9g}"


def _f64(x: float) -> str:
    return f"{float(x):.17g}"


class KaldiWriter:
    """Write Kaldi objects to a byte buffer in text or binary mode."""

    def __init__(self, binary: bool, header: bool = True) -> None:
        self.binary = binary
        self.buf = io.BytesIO()
        if binary and header:
            self.buf.write(BINARY_HEADER)

    def getvalue(self) -> bytes:
        return self.buf.getvalue()

    def raw(self, data: bytes | str) -> None:
        self.buf.write(data.encode() if isinstance(data, str) else data)

    def newline(self) -> None:
        """Kaldi's ``if (!binary) os << "\\n"``."""
        if not self.binary:
            self.buf.write(b"\n")

    def token(self, tok: str) -> None:
        if not tok or any(c.isspace() for c in tok):
            raise ValueError(f"invalid Kaldi token {tok!r}")
        self.raw(tok + " ")

    def int32(self, v: int) -> None:
        if self.binary:
            self.buf.write(struct.pack("<bi", 4, int(v)))
        else:
            self.raw(f"{int(v)} ")

    def float32(self, v: float) -> None:
        if self.binary:
            self.buf.write(struct.pack("<bf", 4, float(v)))
        else:
            self.raw(_f32(v) + " ")

    def float64(self, v: float) -> None:
        if self.binary:
            self.buf.write(struct.pack("<bd", 8, float(v)))
        else:
            self.raw(_f64(v) + " ")

    def boolean(self, v: bool) -> None:
        self.raw(("T" if v else "F") + ("" if self.binary else " "))

    def int_vector(self, values) -> None:
        arr = np.asarray(values, dtype="<i4").ravel()
        if self.binary:
            self.buf.write(struct.pack("<bi", 4, arr.size))
            self.buf.write(arr.tobytes())
        else:
            self.raw("[ " + "".join(f"{int(v)} " for v in arr) + "]\n")

    def vector(self, values, double: bool = False) -> None:
        arr = np.asarray(values, dtype="<f8" if double else "<f4").ravel()
        if self.binary:
            self.token("DV" if double else "FV")
            self.int32(arr.size)
            self.buf.write(arr.tobytes())
        else:
            fmt = _f64 if double else _f32
            self.raw(" [ " + "".join(fmt(v) + " " for v in arr) + "]\n")

    def matrix(self, values, double: bool = False) -> None:
        arr = np.asarray(values, dtype="<f8" if double else "<f4")
        if arr.ndim != 2:
            raise ValueError(f"a Kaldi matrix must be 2-D, got shape {arr.shape}")
        if self.binary:
            self.token("DM" if double else "FM")
            self.int32(arr.shape[0])
            self.int32(arr.shape[1])
            self.buf.write(np.ascontiguousarray(arr).tobytes())
        elif arr.shape[1] == 0:
            self.raw(" [ ]\n")
        else:
            fmt = _f64 if double else _f32
            rows = ("\n  " + "".join(fmt(v) + " " for v in row) for row in arr)
            self.raw(" [" + "".join(rows) + "]\n")

    def packed(self, sym, double: bool = True) -> None:
        """An ``SpMatrix``: the lower triangle of a symmetric matrix, row by row."""
        sym = np.asarray(sym, dtype=np.float64)
        n = sym.shape[0]
        tri = sym[np.tril_indices(n)].astype("<f8" if double else "<f4")
        if self.binary:
            self.token("DP" if double else "FP")
            self.int32(n)
            self.buf.write(tri.tobytes())
        elif n == 0:
            self.raw("[ ]\n")
        else:
            fmt = _f64 if double else _f32
            out, i = ["[\n"], 0
            for j in range(n):
                out.append("".join(fmt(v) + " " for v in tri[i : i + j + 1]))
                out.append("]\n" if j == n - 1 else "\n")
                i += j + 1
            self.raw("".join(out))


class KaldiReader:
    """Read Kaldi objects from bytes; the mode comes from the ``\\0B`` header."""

    def __init__(self, data: bytes, what: str = "Kaldi object") -> None:
        self.what = what
        self.binary = data[:2] == BINARY_HEADER
        self.data = data
        self.pos = 2 if self.binary else 0

    # ------------------------------------------------------------------ low level
    def error(self, msg: str) -> ModelFileError:
        return ModelFileError(f"{self.what}: {msg} (at byte {self.pos})")

    def at_end(self) -> bool:
        self._skip_ws()
        return self.pos >= len(self.data)

    def _skip_ws(self) -> None:
        d, n = self.data, len(self.data)
        while self.pos < n and d[self.pos] in b" \t\n\r":
            self.pos += 1

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise self.error("unexpected end of file")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def _word(self) -> str:
        self._skip_ws()
        start = self.pos
        d, n = self.data, len(self.data)
        while self.pos < n and d[self.pos] not in b" \t\n\r":
            self.pos += 1
        if start == self.pos:
            raise self.error("unexpected end of file")
        return d[start : self.pos].decode("latin-1")

    def token(self) -> str:
        tok = self._word()
        if self.binary and self.pos < len(self.data):
            self.pos += 1  # the space after a binary token
        return tok

    def peek_token(self) -> str:
        save = self.pos
        try:
            return self.token()
        finally:
            self.pos = save

    def expect(self, tok: str) -> None:
        got = self.token()
        if got != tok:
            raise self.error(f"expected {tok}, got {got[:40]!r}")

    def line(self) -> str:
        """The rest of the current line (for the nnet3 config section)."""
        end = self.data.find(b"\n", self.pos)
        if end < 0:
            end = len(self.data)
        out = self.data[self.pos : end].decode()
        self.pos = end + 1
        return out.rstrip("\r")

    # ------------------------------------------------------------------ scalars
    def int32(self) -> int:
        if self.binary:
            size, value = struct.unpack("<bi", self._take(5))
            if size != 4:
                raise self.error(f"expected a 4-byte integer, size byte {size}")
            return value
        word = self._word()
        try:
            return int(word)
        except ValueError:
            raise self.error(f"expected an integer, got {word[:40]!r}") from None

    def float(self) -> float:
        if self.binary:
            size = self._take(1)[0]
            if size == 4:
                return struct.unpack("<f", self._take(4))[0]
            if size == 8:
                return struct.unpack("<d", self._take(8))[0]
            raise self.error(f"expected a float, size byte {size}")
        word = self._word()
        try:
            return float(word)
        except ValueError:
            raise self.error(f"expected a number, got {word[:40]!r}") from None

    def boolean(self) -> bool:
        self._skip_ws()
        c = self._take(1)
        if c not in (b"T", b"F"):
            raise self.error(f"expected T or F, got {c!r}")
        return c == b"T"

    # ------------------------------------------------------------------ arrays
    def _text_numbers_until_bracket(self) -> list[str]:
        self._skip_ws()
        if self._take(1) != b"[":
            raise self.error("expected '['")
        end = self.data.find(b"]", self.pos)
        if end < 0:
            raise self.error("unterminated '['")
        body = self.data[self.pos : end].decode()
        self.pos = end + 1
        return body.split("\n")

    def int_vector(self) -> np.ndarray:
        if self.binary:
            size, n = struct.unpack("<bi", self._take(5))
            if size != 4:
                raise self.error(f"expected an int32 vector, element size {size}")
            return np.frombuffer(self._take(4 * n), dtype="<i4").astype(np.int64)
        words = " ".join(self._text_numbers_until_bracket()).split()
        return np.array([int(w) for w in words], dtype=np.int64)

    def vector(self) -> np.ndarray:
        if self.binary:
            kind = self.token()
            if kind not in ("FV", "DV"):
                raise self.error(f"expected a vector (FV/DV), got {kind!r}")
            n = self.int32()
            dtype = "<f4" if kind == "FV" else "<f8"
            return np.frombuffer(self._take(n * np.dtype(dtype).itemsize), dtype=dtype).copy()
        words = " ".join(self._text_numbers_until_bracket()).split()
        return np.array([float(w) for w in words])

    def matrix(self) -> np.ndarray:
        if self.binary:
            kind = self.token()
            if kind not in ("FM", "DM"):
                raise self.error(f"expected a matrix (FM/DM), got {kind!r}")
            rows, cols = self.int32(), self.int32()
            dtype = "<f4" if kind == "FM" else "<f8"
            size = rows * cols * np.dtype(dtype).itemsize
            return np.frombuffer(self._take(size), dtype=dtype).reshape(rows, cols).copy()
        rows = [r.split() for r in self._text_numbers_until_bracket()]
        rows = [r for r in rows if r]
        if not rows:
            return np.zeros((0, 0))
        if len({len(r) for r in rows}) != 1:
            raise self.error("matrix rows of different lengths")
        return np.array([[float(v) for v in r] for r in rows])

    def packed(self) -> np.ndarray:
        """An ``SpMatrix`` as the full symmetric matrix."""
        if self.binary:
            kind = self.token()
            if kind not in ("FP", "DP"):
                raise self.error(f"expected a packed matrix (FP/DP), got {kind!r}")
            n = self.int32()
            dtype = "<f4" if kind == "FP" else "<f8"
            count = n * (n + 1) // 2
            tri = np.frombuffer(self._take(count * np.dtype(dtype).itemsize), dtype=dtype)
        else:
            tri = np.array([float(w) for w in " ".join(self._text_numbers_until_bracket()).split()])
            n = round((np.sqrt(8 * tri.size + 1) - 1) / 2)
            if n * (n + 1) // 2 != tri.size:
                raise self.error(f"{tri.size} values do not fill a packed triangle")
        out = np.zeros((n, n))
        out[np.tril_indices(n)] = tri
        return out + np.tril(out, -1).T
