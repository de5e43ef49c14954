"""The per-archive pieces of one egs split job: each eg written once, read once.

Stage 4 of Kaldi's ``steps/nnet3/get_egs.sh`` writes every eg of split job j straight
into the piece of its archive (``nnet3-copy-egs --random=true ark:- egs_orig.j.1.ark …
egs_orig.j.A.ark``) and stage 5's job for archive a reads only ``egs_orig.*.a.ark``. Here
split job j writes one file per field whose rows are grouped by archive: archive a's piece
is rows ``offsets[a] … offsets[a+1] − 1``, its egs in the job's order (utterance order, the
order Kaldi's pieces have). One file per field, not one per (field, archive), keeps the
open files and the rule's outputs independent of the number of archives (Kaldi's
``archives_multiple`` exists for the file-handle limit); the gather job of archive a
maps only its pieces' rows (:func:`open_piece`), so the egs stage reads each eg once.

Files of a split prefix ``P`` (:func:`piece_files`):

    P.feats.npy, P.labels.npy, P.weights.npy[, P.ivectors.npy][, P.chunks.npy]
                   the fields of :mod:`paravg.egs.archive`, rows grouped by archive
    P.keys.npy     (n,) ``S<w>``: each eg's key ``<utt>-<first_frame>`` in UTF-8 (a fixed
                   width, so that a piece's keys are a row range too)
    P.offsets.npy  (A + 1,) int64: the first row of each archive's piece, then n
    P.meta.json    the :class:`~paravg.egs.archive.ArchiveMeta` and the sha256 of every
                   other file; written last (the completion mark)

:class:`PieceWriter` is told each piece's size before the first eg (the split job counts
its egs and draws their archives first: :mod:`paravg.egs.split`) and writes each buffer
of egs with ``pwrite`` at its archives' cursors: the job holds one buffer, and neither its
output (no memory map) nor a Python object per eg.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import numpy as np

from paravg.egs.archive import ArchiveMeta, EgsBatch, open_arrays, save_npy_atomic
from paravg.errors import DataError
from paravg.io import atomic_path, file_sha256, preallocate, write_json_atomic


def piece_files(
    prefix: str | os.PathLike, with_ivectors: bool, chunked: bool = False
) -> dict[str, str]:
    """Field name -> file of split job ``prefix`` (``meta`` last: the completion mark)."""
    prefix = str(prefix)
    files = {name: f"{prefix}.{name}.npy" for name in ("feats", "labels", "weights")}
    if with_ivectors:
        files["ivectors"] = f"{prefix}.ivectors.npy"
    if chunked:
        files["chunks"] = f"{prefix}.chunks.npy"
    files["eg_keys"] = f"{prefix}.keys.npy"  # ("keys": reserved by Snakemake)
    files["offsets"] = f"{prefix}.offsets.npy"
    files["meta"] = f"{prefix}.meta.json"
    return files


def key_bytes(keys: list[str], width: int) -> np.ndarray:
    """``keys`` as a fixed-width ``S<width>`` array (UTF-8); a longer key is an error
    (numpy would cut it silently)."""
    encoded = [k.encode("utf-8") for k in keys]
    longest = max((len(k) for k in encoded), default=0)
    if longest > width:
        raise ValueError(f"eg key of {longest} bytes, the split job planned {width}")
    return np.array(encoded, dtype=f"S{width}")


def _create_npy(path: Path, shape: tuple[int, ...], dtype: str) -> int:
    """Write an ``.npy`` header for ``shape`` / ``dtype``, size the file, reserve its
    blocks (a full disk fails here); return the data's offset."""
    with open(path, "wb") as f:
        header = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
            "fortran_order": False,
            "shape": shape,
        }
        np.lib.format.write_array_header_1_0(f, header)
        start = f.tell()
        f.truncate(start + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
    preallocate(path, os.path.getsize(path))
    return start


class PieceWriter:
    """Write the egs of one split job into per-archive pieces of known sizes.

    ``counts[a]`` egs go to archive a; :meth:`write` takes a batch and each eg's archive
    and appends each archive's egs (in batch order) at its piece's cursor. Every file is
    written under a temporary name and renamed on :meth:`close`, which first checks that
    every piece is full; the meta file last. Use as a context manager: on an exception
    nothing is renamed.
    """

    def __init__(
        self, prefix: str | os.PathLike, meta: ArchiveMeta, counts: np.ndarray, key_width: int
    ) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        self.prefix = str(prefix)
        self.meta = meta
        self.files = piece_files(prefix, meta.ivector_dim > 0, meta.chunked)
        self.offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        if self.offsets[-1] != meta.num_egs:
            raise ValueError(f"{prefix}: pieces of {self.offsets[-1]} egs, meta {meta.num_egs}")
        self.key_width = max(1, key_width)
        self._cursor = self.offsets[:-1].copy()
        self._stack = contextlib.ExitStack()
        self._out: dict[str, tuple[int, int, int]] = {}  # field -> (fd, data offset, row bytes)
        shapes = {**meta.shapes(), "eg_keys": ((meta.num_egs,), f"S{self.key_width}")}
        try:
            for name, (shape, dtype) in shapes.items():
                tmp = self._stack.enter_context(atomic_path(self.files[name], suffix=".npy"))
                start = _create_npy(tmp, shape, dtype)
                fd = os.open(tmp, os.O_WRONLY)
                self._stack.callback(os.close, fd)  # closed before the rename
                row = int(np.prod(shape[1:], dtype=np.int64)) * np.dtype(dtype).itemsize
                self._out[name] = (fd, start, row)
        except BaseException:
            if not self._stack.__exit__(*sys.exc_info()):  # removes the temporaries
                raise

    def write(self, batch: EgsBatch, archives: np.ndarray) -> None:
        """Append the egs of ``batch`` to the pieces of ``archives`` (one per eg)."""
        archives = np.asarray(archives, dtype=np.int64)
        if len(archives) != len(batch):
            raise ValueError(f"{len(batch)} egs but {len(archives)} archive indices")
        if not len(batch):
            return
        order = np.argsort(archives, kind="stable")  # per archive, in batch order
        present, first, count = np.unique(archives[order], return_index=True, return_counts=True)
        if present[0] < 0 or present[-1] >= len(self._cursor):
            raise ValueError(f"archive index out of range 0..{len(self._cursor) - 1}")
        ends = self._cursor[present] + count
        full = np.flatnonzero(ends > self.offsets[present + 1])
        if len(full):
            a = int(present[full[0]])
            raise ValueError(f"{self.prefix}: more egs for archive {a} than the planned piece")
        fields = {name: getattr(batch, name) for name in self._out if name != "eg_keys"}
        fields["eg_keys"] = key_bytes(batch.keys, self.key_width)
        for name, values in fields.items():
            fd, start, row = self._out[name]
            rows = np.ascontiguousarray(values[order])
            for a, i, c in zip(present.tolist(), first.tolist(), count.tolist(), strict=True):
                offset = start + int(self._cursor[a]) * row
                _pwrite_all(fd, memoryview(rows[i : i + c]).cast("B"), offset)
        self._cursor[present] = ends

    def close(self) -> None:
        short = np.flatnonzero(self._cursor != self.offsets[1:])
        if len(short):
            a = int(short[0])
            raise ValueError(
                f"{self.prefix}: archive {a}'s piece has {self._cursor[a] - self.offsets[a]} "
                f"egs, planned {self.offsets[a + 1] - self.offsets[a]}"
            )
        self._stack.close()  # closes the files, renames them into place
        save_npy_atomic(self.files["offsets"], self.offsets)
        sums = {
            Path(path).name: file_sha256(path)
            for name, path in self.files.items()
            if name != "meta"
        }
        write_json_atomic(self.files["meta"], {**self.meta.to_dict(), "sha256": sums})

    def __enter__(self) -> PieceWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._stack.__exit__(exc_type, exc, tb)


def _pwrite_all(fd: int, data: memoryview, offset: int) -> None:
    """``os.pwrite`` all of ``data`` at ``offset`` (a short write continues)."""
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


def open_piece(
    prefix: str | os.PathLike, archive: int, num_archives: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Archive ``archive``'s piece of split job ``prefix``: its rows of every array field
    (memory-mapped, read-only) and its keys (``S<w>``).

    The files are not checked against their sha256: a gather job reads 1/num_archives of
    them, hashing them whole would cost the egs num_archives times
    (:mod:`paravg.egs.archive`, "Integrity"); their shapes are checked.
    """
    files = piece_files(prefix, False)
    offsets = np.load(files["offsets"])
    if offsets.shape != (num_archives + 1,):
        raise DataError(
            f"{files['offsets']}: pieces of {len(offsets) - 1} archives, the egs plan has "
            f"{num_archives}: the split job's output is stale (remove it and rerun)"
        )
    if not 0 <= archive < num_archives:
        raise ValueError(f"archive {archive} out of range 0..{num_archives - 1}")
    arrays = open_arrays(prefix, check=False)
    keys = np.load(files["eg_keys"], mmap_mode="r")
    n = len(keys)
    if offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 0):
        raise DataError(f"{files['offsets']}: not the row ranges of {n} egs")
    for name, array in arrays.items():
        if len(array) != n:
            raise DataError(f"{prefix}: {n} keys but {len(array)} rows of {name}")
    lo, hi = int(offsets[archive]), int(offsets[archive + 1])
    return {name: array[lo:hi] for name, array in arrays.items()}, keys[lo:hi]
