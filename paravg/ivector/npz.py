"""Deterministic, atomic ``.npz`` files for the i-vector models and statistics.

``numpy.savez`` stamps every member with the current time, so a rerun job would write
different bytes; here members get a fixed timestamp, and the file appears under its final
name only when complete (``paravg.io.atomic_path``). Loading never unpickles.
:func:`npz_writer` adds members one at a time and :func:`open_npz` reads them one at a time,
so a file larger than memory (a job's per-frame table) streams through in pieces.
"""

from __future__ import annotations

import contextlib
import os
import zipfile
from collections.abc import Callable, Iterator

import numpy as np

from paravg.io import atomic_path

_EPOCH = (1980, 1, 1, 0, 0, 0)


def save_npz(path: str | os.PathLike, **arrays) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` with reproducible bytes."""
    with npz_writer(path) as add:
        for name, value in arrays.items():
            add(name, value)


@contextlib.contextmanager
def npz_writer(path: str | os.PathLike) -> Iterator[Callable[[str, np.ndarray], None]]:
    """``with npz_writer(path) as add: add(name, array); ...``: the members in the order
    added, each written when added (nothing kept); the file appears complete or not at all."""
    with atomic_path(path, suffix=".npz") as tmp, zipfile.ZipFile(tmp, "w") as zf:

        def add(name: str, value) -> None:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)

        yield add


def load_npz(
    path: str | os.PathLike, kind: str, what: str, error: type[ValueError] = ValueError
) -> dict[str, np.ndarray]:
    """Read a file written by :func:`save_npz` whose ``kind`` member must equal ``kind``;
    anything else raises ``error`` naming the file."""
    with open_npz(path, kind, what, error) as z:
        try:
            return {k: z[k] for k in z.files}
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise error(f"{path}: cannot read {what} ({exc})") from exc


@contextlib.contextmanager
def open_npz(
    path: str | os.PathLike, kind: str, what: str, error: type[ValueError] = ValueError
) -> Iterator[np.lib.npyio.NpzFile]:
    """The lazily read ``.npz`` (``z[name]`` reads that member only) of :func:`load_npz`,
    after the same ``kind`` check."""
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise error(f"{path}: cannot read {what} ({exc})") from exc
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise error(f"{path}: not {what} written by paravg.ivector")
    with z:
        try:
            ok = "kind" in z.files and str(z["kind"]) == kind
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise error(f"{path}: cannot read {what} ({exc})") from exc
        if not ok:
            raise error(f"{path}: not {what} written by paravg.ivector")
        yield z
