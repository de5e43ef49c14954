"""The egs archive format: one ``.npy`` file per field, memory-mappable.

An archive with prefix ``P`` (e.g. ``results/egs/egs.3``) is the files

    P.feats.npy     (n_eg, lc + F + rc, D)  float16 if egs.compress else float32
    P.labels.npy    (n_eg, F)               int32   pdf id of each labelled frame
    P.weights.npy   (n_eg, F)               float32 output weight (1/#chunks covering it;
                                                    0 where the targets were missing)
    P.ivectors.npy  (n_eg, ivector_dim)     float32 (only when ivector_dim > 0)
    P.chunks.npy    (n_eg, 3)               int32   chunk egs only: width, left, right
    P.keys.txt      one ``<utt>-<first_frame>`` per eg
    P.meta.json     num_egs, frames_per_eg, left_context, right_context, feat_dim, ...,
                    sha256: {file name: sha256} of every other file of the archive

This stores the fields of Kaldi's ``NnetExample`` (``src/nnet3bin/nnet3-get-egs.cc``):
the ``input`` rows t = −lc … F−1+rc relative to the chunk's first frame, padded by
repeating the first / last frame of the utterance (``ExtractRowRangeWithPadding``); the
``ivector`` row; the ``output`` one-hot labels times the output weights. Kaldi's lossy
8-bit ``CompressedMatrix`` is replaced by float16. ``meta.json`` is written last, so an
archive with a meta file is complete.

Integrity (as the model files', :mod:`paravg.provenance`): the meta records the sha256 of
each file the writer wrote, and every reader of the archives and subsets
(:func:`open_arrays`: a training job its own archive, init_model and the priors the
LDA-like transform's archives, diagnostics and combination their subsets) checks the files
it opens against it before it uses a byte, so a file changed after it was written is never
trained on. The cost is one read of the files the job reads anyway (docs/reproducibility.md).
The one exception is the gather of an archive from the split jobs' temporary archives
(:func:`paravg.egs.shuffle.merge_archive`): each gather job reads 1/num_archives of every
split file, and hashing them whole in every gather would cost num_archives times the egs.
An archive whose meta has no ``sha256`` (written before the records) is read unchecked.

Chunk egs (``egs.chunk_width``, Kaldi's RNN egs) have several structures: widths from
the list and, on an utterance's first / last chunk, the initial / final contexts. Kaldi
stores each eg with its own shape and ``nnet3-merge-egs`` merges only egs of one
structure. Here every eg of a chunked archive is stored in the widest window
(F = the largest width, lc / rc the largest left / right context; the meta's
``chunked``), its own structure in ``P.chunks.npy``: eg rows lc − left … lc + width +
right − 1 are its input (utterance frames, edge-padded as above), labels and weights
beyond its width are 0 / 0.0. The loader groups egs by structure
(:func:`paravg.egs.loader.chunk_minibatches`).

How the fields are computed from an utterance: :mod:`paravg.egs.make`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.io import (
    atomic_path,
    file_sha256,
    preallocate,
    read_json,
    write_json_atomic,
    write_text_atomic,
)

ARRAY_FIELDS = ("feats", "labels", "weights", "ivectors", "chunks")


def archive_files(
    prefix: str | os.PathLike, with_ivectors: bool, chunked: bool = False
) -> dict[str, str]:
    """Field name -> file of the archive ``prefix`` (``meta`` last: the completion mark)."""
    prefix = str(prefix)
    files = {"feats": f"{prefix}.feats.npy", "labels": f"{prefix}.labels.npy"}
    files["weights"] = f"{prefix}.weights.npy"
    if with_ivectors:
        files["ivectors"] = f"{prefix}.ivectors.npy"
    if chunked:
        files["chunks"] = f"{prefix}.chunks.npy"
    files["key_list"] = f"{prefix}.keys.txt"
    files["meta"] = f"{prefix}.meta.json"
    return files


@dataclass(frozen=True)
class ArchiveMeta:
    """Shape information of one archive (``<prefix>.meta.json``)."""

    num_egs: int
    frames_per_eg: int
    left_context: int
    right_context: int
    feat_dim: int
    ivector_dim: int
    feats_dtype: str  # "float16" or "float32"
    chunked: bool = False  # chunk egs: per-eg structure in P.chunks.npy (module docstring)

    @property
    def window(self) -> int:
        return self.left_context + self.frames_per_eg + self.right_context

    def to_dict(self) -> dict:
        """``meta.json``'s content (``chunked`` only when true: frame egs' files are as
        they were before chunk egs)."""
        out = asdict(self)
        if not self.chunked:
            del out["chunked"]
        return out

    def with_num_egs(self, num_egs: int) -> ArchiveMeta:
        return ArchiveMeta(**{**asdict(self), "num_egs": num_egs})

    def shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Field -> (shape, dtype) of the arrays of this archive."""
        n, F = self.num_egs, self.frames_per_eg
        out = {
            "feats": ((n, self.window, self.feat_dim), self.feats_dtype),
            "labels": ((n, F), "int32"),
            "weights": ((n, F), "float32"),
        }
        if self.ivector_dim:
            out["ivectors"] = ((n, self.ivector_dim), "float32")
        if self.chunked:
            out["chunks"] = ((n, 3), "int32")
        return out

    @classmethod
    def load(cls, path: str | os.PathLike) -> ArchiveMeta:
        """The shape information of ``meta.json`` (its ``sha256`` records aside)."""
        fields = read_json(path)
        fields.pop("sha256", None)
        return cls(**fields)


@dataclass
class EgsBatch:
    """Egs held in memory, field by field (the rows of an archive)."""

    feats: np.ndarray
    labels: np.ndarray
    weights: np.ndarray
    ivectors: np.ndarray | None
    keys: list[str]
    chunks: np.ndarray | None = None  # (n, 3) width, left, right: chunk egs only

    def __len__(self) -> int:
        return len(self.keys)

    def take(self, index: np.ndarray) -> EgsBatch:
        index = np.asarray(index, dtype=np.int64)
        return EgsBatch(
            self.feats[index],
            self.labels[index],
            self.weights[index],
            None if self.ivectors is None else self.ivectors[index],
            [self.keys[i] for i in index],
            None if self.chunks is None else self.chunks[index],
        )

    @classmethod
    def concatenate(cls, batches: list[EgsBatch], meta: ArchiveMeta) -> EgsBatch:
        """Concatenate ``batches`` (an empty list gives an empty batch of ``meta``'s shape)."""
        if not batches:
            empty = {k: np.zeros(s, d) for k, (s, d) in meta.with_num_egs(0).shapes().items()}
            return cls(
                empty["feats"],
                empty["labels"],
                empty["weights"],
                empty.get("ivectors"),
                [],
                empty.get("chunks"),
            )
        return cls(
            np.concatenate([b.feats for b in batches]),
            np.concatenate([b.labels for b in batches]),
            np.concatenate([b.weights for b in batches]),
            None if batches[0].ivectors is None else np.concatenate([b.ivectors for b in batches]),
            [k for b in batches for k in b.keys],
            None if batches[0].chunks is None else np.concatenate([b.chunks for b in batches]),
        )


class ArchiveWriter:
    """Write an archive of a known number of egs, batch by batch, into preallocated memmaps.

    Every file is written under a temporary name and renamed on :meth:`close`; the meta
    file last. Use as a context manager: on an exception nothing is renamed.
    """

    def __init__(self, prefix: str | os.PathLike, meta: ArchiveMeta) -> None:
        self.prefix = str(prefix)
        self.meta = meta
        self.files = archive_files(prefix, meta.ivector_dim > 0, meta.chunked)
        self._stack = contextlib.ExitStack()
        self._arrays: dict[str, np.ndarray] = {}
        self._keys: list[str] = []
        self._pos = 0
        try:
            for name, (shape, dtype) in meta.shapes().items():
                tmp = self._stack.enter_context(atomic_path(self.files[name], suffix=".npy"))
                array = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=shape)
                # a full disk is an OSError here, not a SIGBUS at the first write
                preallocate(tmp, os.path.getsize(tmp))
                self._arrays[name] = array
        except BaseException:
            self._arrays.clear()
            if not self._stack.__exit__(*sys.exc_info()):  # removes the temporaries
                raise

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The preallocated output arrays (memmaps) for direct filling."""
        return self._arrays

    def append(self, batch: EgsBatch) -> None:
        n = len(batch)
        end = self._pos + n
        if end > self.meta.num_egs:
            raise ValueError(f"{self.prefix}: more egs than the {self.meta.num_egs} planned")
        for name, array in self._arrays.items():
            array[self._pos : end] = getattr(batch, name)
        self._keys.extend(batch.keys)
        self._pos = end

    def set_keys(self, keys: list[str]) -> None:
        """Keys of all egs, when the arrays were filled directly through :attr:`arrays`."""
        self._keys = list(keys)
        self._pos = len(keys)

    def close(self) -> None:
        if self._pos != self.meta.num_egs or len(self._keys) != self.meta.num_egs:
            raise ValueError(
                f"{self.prefix}: wrote {self._pos} egs ({len(self._keys)} keys), "
                f"planned {self.meta.num_egs}"
            )
        for array in self._arrays.values():
            array.flush()
        self._arrays.clear()
        self._stack.close()  # renames the .npy files into place
        write_text_atomic(self.files["key_list"], "".join(k + "\n" for k in self._keys))
        sums = {
            Path(path).name: file_sha256(path)
            for name, path in self.files.items()
            if name != "meta"
        }
        write_json_atomic(self.files["meta"], {**self.meta.to_dict(), "sha256": sums})

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._arrays.clear()
            self._stack.__exit__(exc_type, exc, tb)


def write_archive(prefix: str | os.PathLike, batch: EgsBatch, meta: ArchiveMeta) -> None:
    """Write an in-memory batch as an archive."""
    with ArchiveWriter(prefix, meta.with_num_egs(len(batch))) as writer:
        writer.append(batch)


def save_npy_atomic(path: str | os.PathLike, array: np.ndarray) -> None:
    """``np.save`` to a temporary name, then rename."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, array)


def open_arrays(prefix: str | os.PathLike, check: bool = True) -> dict[str, np.ndarray]:
    """Memory-map the array fields of an archive (read-only), its files first checked
    against the sha256 its meta recorded (:func:`check_archive_files`; ``check=False``:
    only for a reader of a small part of the files, see the module doc), the arrays
    against its shapes. A damaged file raises a :class:`DataError` that names it and says
    how to rebuild the archive."""
    meta_path = f"{prefix}.meta.json"
    meta = ArchiveMeta.load(meta_path)
    files = archive_files(prefix, meta.ivector_dim > 0, meta.chunked)
    if check:
        check_archive_files(prefix, files, read_json(meta_path).get("sha256"))
    arrays = {}
    for name, (shape, dtype) in meta.shapes().items():
        try:
            array = np.load(files[name], mmap_mode="r")
        except Exception as exc:  # a damaged header: TokenError, ValueError, EOFError ...
            raise damaged_archive(
                prefix, files[name], f"not a readable npy file ({type(exc).__name__}: {exc})"
            ) from exc
        if array.shape != shape or array.dtype != np.dtype(dtype):
            raise DataError(
                f"{files[name]}: shape {array.shape} {array.dtype}, meta says {shape} {dtype}"
            )
        arrays[name] = array
    return arrays


def check_archive_files(
    prefix: str | os.PathLike, files: dict[str, str], recorded: dict[str, str] | None
) -> None:
    """Raise :func:`damaged_archive` for the first file of ``files`` (field -> path) whose
    sha256 differs from ``recorded`` (file name -> sha256, the meta's; None: written
    before the records, nothing to compare with)."""
    if not recorded:
        return
    meta_path = files["meta"]
    for name, path in files.items():
        expected = recorded.get(Path(path).name)
        if name == "meta" or expected is None:
            continue
        try:
            found = file_sha256(path)
        except OSError as exc:
            raise damaged_archive(prefix, path, f"cannot be read ({exc.strerror or exc})") from exc
        if found != expected:
            raise damaged_archive(
                prefix,
                path,
                f"its bytes differ from what the egs stage recorded when it wrote it (sha256 "
                f"{expected[:12]}… in {meta_path}): the file changed after it was written",
            )


def damaged_archive(prefix: str | os.PathLike, path: str | os.PathLike, what: str) -> DataError:
    """The error for a damaged file of archive ``prefix``: what is wrong, and the commands
    that rebuild exactly that archive (the same bytes: the egs stage is deterministic)."""
    return DataError(
        f"{path}: {what}. Rebuild this archive (and nothing else) "
        "with your usual snakemake options, then run your command again:\n"
        f"    rm {prefix}.*\n"
        f"    snakemake <your options: --profile/--cores, --configfile ...> {prefix}.meta.json"
    )


def read_keys(prefix: str | os.PathLike) -> list[str]:
    return Path(f"{prefix}.keys.txt").read_text().split("\n")[:-1]
