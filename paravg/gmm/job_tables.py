"""One GMM job's tables, read and written one utterance at a time.

Kaldi's GMM binaries read their ``feats``, ``ali`` and ``text`` tables with sequential
readers and write ``ali.JOB`` with a table writer, so a job holds one utterance, never its
share of the corpus (``gmm-acc-stats-ali``, ``gmm-align-compiled``, ``acc-tree-stats``
read ``ark,s,cs:`` tables: sorted, and called in sorted order). The same here:

* :func:`iter_feats`: ``(utt, float32 [T, D])`` of a ``feats.scp``, line by line
  (:func:`paravg.kaldi_io.iter_scp`).
* :func:`iter_alignments`: ``(utt, int32 transition-ids)`` of an ``ali.JOB`` (ark through a
  window, :func:`paravg.kaldi_io.iter_int_vectors`).
* :func:`iter_transcripts`: ``(utt, word ids)`` of a data dir's ``text``, mapped by the
  lang's ``words.txt`` as ``sym2int.pl --map-oov <oov.txt>`` maps them.
* :func:`join_sorted`: the keys present in every one of several key-sorted streams, with
  each stream's value (a merge-join: one entry of each stream held). A stream whose keys
  are not in ``LC_ALL=C`` order is a :class:`DataError` naming its file, as Kaldi's
  ``s,cs`` readers fail on an unsorted table.
* :class:`AlignmentWriter`: ``ali.JOB`` written entry by entry into a temporary file that
  replaces the output only when the job finishes (nothing half-written).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.graph.lang import read_symbol_table
from paravg.kaldi_io import int32_vector_bytes, iter_int_vectors, iter_scp, iter_table


def iter_feats(scp: str | os.PathLike) -> Iterator[tuple[str, np.ndarray]]:
    """``(utt, float32 [T, D])`` of each line of a feature scp, in file order."""
    for utt, _where, matrix in iter_scp(scp):
        yield utt, np.asarray(matrix, np.float32)


def iter_alignments(path: str | os.PathLike) -> Iterator[tuple[str, np.ndarray]]:
    """``(utt, int32 transition-ids)`` of each entry of an alignment table, in file order."""
    for utt, vec, _place in iter_int_vectors(path):
        yield utt, vec.astype(np.int32)


def iter_transcripts(
    lang_dir: str | os.PathLike, text: str | os.PathLike
) -> Iterator[tuple[str, list[int]]]:
    """``(utt, word ids)`` of each line of ``text``: words of the lang's ``words.txt``, the
    others mapped to its ``oov.txt`` word (``sym2int.pl --map-oov``), or, without one, a
    :class:`DataError` naming the file, the line and the words."""
    lang = Path(lang_dir)
    words = read_symbol_table(lang / "words.txt")
    oov_file = lang / "oov.txt"
    oov = oov_file.read_text().split()[0] if oov_file.is_file() else None
    if oov is not None and oov not in words:
        raise DataError(f"{oov_file}: OOV word {oov!r} is not in {lang / 'words.txt'}")
    for line in iter_table(text, min_fields=1, require_sorted=False):
        unknown = sorted({w for w in line.fields if w not in words})
        if unknown and oov is None:
            raise DataError(
                f"{text}, line {line.lineno}: utterance {line.key}: words {unknown} are not "
                f"in the lexicon (add them, or give an OOV word such as <unk> to map them to)"
            )
        yield line.key, [words.get(w, words.get(oov, 0)) for w in line.fields]


class _Sorted:
    """One stream of a merge-join: its current entry, advanced in ``LC_ALL=C`` order."""

    def __init__(self, name: str, stream: Iterable[tuple]):
        self.name, self._it = name, iter(stream)
        self.entry: tuple | None = None
        self.advance()

    def advance(self) -> None:
        last = None if self.entry is None else self.entry[0]
        self.entry = next(self._it, None)
        if self.entry is not None and last is not None and self.entry[0].encode() <= last.encode():
            raise DataError(
                f"{self.name}: not sorted: {self.entry[0]!r} after {last!r} (Kaldi's tables are "
                f"in LC_ALL=C order without repeats; sort it with utils/fix_data_dir.sh)"
            )


def join_sorted(*streams: tuple[str, Iterable[tuple]]) -> Iterator[tuple]:
    """``(key, value_1, …, value_n)`` for each key in all of the ``(name, stream)``
    streams of ``(key, value)`` pairs, each stream in ascending key order."""
    if not streams:
        return
    cursors = [_Sorted(name, stream) for name, stream in streams]
    while all(c.entry is not None for c in cursors):
        keys = [c.entry[0].encode() for c in cursors]
        top = max(keys)
        if all(k == top for k in keys):
            yield (cursors[0].entry[0], *(c.entry[1] for c in cursors))
            for c in cursors:
                c.advance()
            continue
        for c, k in zip(cursors, keys, strict=True):
            if k < top:
                c.advance()


class AlignmentWriter:
    """``ali.JOB`` as a binary ark (``.ark``) or text (any other suffix), written one
    entry at a time to ``<path>.tmp`` and moved onto ``path`` by :meth:`close` (a
    ``with`` block that raises leaves ``path`` as it was and removes the temporary)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.binary = self.path.suffix == ".ark"
        self._f = open(self.tmp, "wb")  # noqa: SIM115 (closed by close/abort)
        self.count = 0

    def write(self, utt: str, ali: np.ndarray) -> None:
        ali = np.asarray(ali, np.int32)
        if self.binary:
            self._f.write(utt.encode() + b" " + int32_vector_bytes(ali))
        else:
            self._f.write(f"{utt} {' '.join(map(str, ali.tolist()))}\n".encode())
        self.count += 1

    def close(self) -> None:
        self._f.close()
        self.tmp.replace(self.path)

    def abort(self) -> None:
        self._f.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> AlignmentWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
