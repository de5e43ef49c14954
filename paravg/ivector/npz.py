"""Deterministic, atomic ``.npz`` files for the i-vector models and statistics.

``numpy.savez`` stamps every member with the current time, so a rerun job would write
different bytes; here members get a fixed timestamp, and the file appears under its final
name only when complete (``paravg.io.atomic_path``). Loading never unpickles.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np

from paravg.io import atomic_path

_EPOCH = (1980, 1, 1, 0, 0, 0)


def save_npz(path: str | os.PathLike, **arrays) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` with reproducible bytes."""
    with atomic_path(path, suffix=".npz") as tmp, zipfile.ZipFile(tmp, "w") as zf:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            with zf.open(info, "w", force_zip64=True) as f:
                np.lib.format.write_array(f, np.asanyarray(value), allow_pickle=False)


def load_npz(
    path: str | os.PathLike, kind: str, what: str, error: type[ValueError] = ValueError
) -> dict[str, np.ndarray]:
    """Read a file written by :func:`save_npz` whose ``kind`` member must equal ``kind``;
    anything else raises ``error`` naming the file."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise error(f"{path}: cannot read {what} ({exc})") from exc
    if "kind" not in data or str(data["kind"]) != kind:
        raise error(f"{path}: not {what} written by paravg.ivector")
    return data
