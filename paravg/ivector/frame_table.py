"""A job's per-frame table (Gaussian selection, pruned posteriors), streamed in chunks.

Kaldi writes these tables as archives read back in order, never whole
(``gmm-gselect … "ark:|gzip -c >gselect.JOB.gz"`` read by ``gmm-global-acc-stats
"--gselect=ark,s,cs:gunzip -c gselect.JOB.gz|"``; ``post.JOB.gz`` read by
``ivector-extractor-acc-stats`` in ``steps/online/nnet2/train_ivector_extractor.sh``).
Here the table is one ``.npz`` (:mod:`paravg.ivector.npz`) of chunks: chunk ``k`` holds
members ``utts.k`` (names), ``lengths.k`` (frames per utterance) and one ``<column>.k`` per
column, its utterances' rows concatenated. A chunk is written once it holds at least
``chunk_frames`` frames (whole utterances: at most ``chunk_frames`` plus one utterance), so
writer and reader hold one chunk, whatever the job's size; ``chunks`` says how many there are.

The reader serves the utterances in the order written, which is the order in which every
stage walks a job's speakers (:func:`paravg.ivector.data.job_speakers`); an utterance out
of order or of another length means the table was made from other data.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

import numpy as np

from paravg.errors import DataError
from paravg.ivector.npz import npz_writer, open_npz

#: Frames per chunk: 50,000 kept frames (1,000 s of audio at subsample 2) are 6 MB of
#: gselect indices (30 int32) and 2.4 MB of posteriors (5 int32 + 5 float64).
CHUNK_FRAMES = 50_000


class FrameTableWriter:
    """``with FrameTableWriter(path, kind, columns) as w: w.add(utt, col=rows, ...)``.

    ``columns`` maps each column name to its empty ``(0, width)`` array (dtype and width of
    a table with no frames)."""

    def __init__(
        self,
        path: str | os.PathLike,
        kind: str,
        columns: dict[str, np.ndarray],
        chunk_frames: int = CHUNK_FRAMES,
    ):
        if chunk_frames < 1:
            raise ValueError(f"chunk_frames must be positive, got {chunk_frames}")
        self.path, self.kind, self.chunk_frames = path, kind, chunk_frames
        self.empty = columns
        self._stack = ExitStack()
        self._add = None
        self._chunks = 0
        self._utts: list[str] = []
        self._lengths: list[int] = []
        self._parts: dict[str, list[np.ndarray]] = {c: [] for c in columns}
        self._frames = 0

    def __enter__(self) -> FrameTableWriter:
        self._add = self._stack.enter_context(npz_writer(self.path))
        self._add("kind", np.array(self.kind))
        return self

    def add(self, utt: str, **rows: np.ndarray) -> None:
        """Append one utterance's rows (one array per column, the same number of rows)."""
        if rows.keys() != self._parts.keys():
            raise ValueError(f"columns {sorted(rows)} but the table has {sorted(self._parts)}")
        lengths = {r.shape[0] for r in rows.values()}
        if len(lengths) != 1:
            raise ValueError(f"utterance {utt!r}: columns of different lengths {lengths}")
        self._utts.append(utt)
        self._lengths.append(lengths.pop())
        for name, r in rows.items():
            self._parts[name].append(r)
        self._frames += self._lengths[-1]
        if self._frames >= self.chunk_frames:
            self._flush()

    def _flush(self) -> None:
        k = self._chunks
        self._add(f"utts.{k}", np.array(self._utts, dtype=str))
        self._add(f"lengths.{k}", np.array(self._lengths, dtype=np.int64))
        for name, parts in self._parts.items():
            self._add(f"{name}.{k}", np.concatenate(parts) if parts else self.empty[name])
            parts.clear()
        self._utts, self._lengths, self._frames = [], [], 0
        self._chunks += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:  # the job failed: the temporary file goes
            self._stack.__exit__(exc_type, exc, tb)
            return
        with self._stack:  # the file appears complete, or goes if this fails
            if self._utts or self._chunks == 0:
                self._flush()
            self._add("chunks", np.array(self._chunks, dtype=np.int64))


class FrameTableReader:
    """``with FrameTableReader(path, kind, what, columns) as r: r.take(utt, num_frames)``."""

    def __init__(self, path: str | os.PathLike, kind: str, what: str, columns: tuple[str, ...]):
        self.path, self.kind, self.what, self.columns = path, kind, what, columns
        self._stack = ExitStack()

    def __enter__(self) -> FrameTableReader:
        self._z = self._stack.enter_context(open_npz(self.path, self.kind, self.what, DataError))
        if "chunks" not in self._z.files:
            raise DataError(f"{self.path}: {self.what} is incomplete (no chunk count)")
        self._num_chunks = int(self._z["chunks"])
        self._next_chunk = 0
        self._utts: list[str] = []
        self._pos = 0  # next utterance in the chunk
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._stack.__exit__(exc_type, exc, tb)

    def _load_chunk(self) -> None:
        k = self._next_chunk
        z = self._z
        self._utts = [str(u) for u in z[f"utts.{k}"]]
        lengths = z[f"lengths.{k}"]
        self._ends = np.cumsum(lengths)
        self._columns = {name: z[f"{name}.{k}"] for name in self.columns}
        self._pos = 0
        self._next_chunk += 1

    def take(self, utt: str, num_frames: int) -> dict[str, np.ndarray]:
        """The rows of ``utt``, which must be the table's next utterance, of ``num_frames``."""
        while self._pos == len(self._utts):
            if self._next_chunk == self._num_chunks:
                raise DataError(
                    f"{self.path}: no entry for utterance {utt!r} (the table ends; was it "
                    f"made from other data?)"
                )
            self._load_chunk()
        found = self._utts[self._pos]
        if found != utt:
            raise DataError(
                f"{self.path}: no entry for utterance {utt!r} (the next entry is {found!r}; "
                f"was it made from other data?)"
            )
        end = int(self._ends[self._pos])
        start = int(self._ends[self._pos - 1]) if self._pos else 0
        if end - start != num_frames:
            raise DataError(
                f"{self.path}: utterance {utt!r} has {end - start} frames there but "
                f"{num_frames} now"
            )
        self._pos += 1
        return {name: col[start:end] for name, col in self._columns.items()}
