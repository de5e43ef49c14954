"""Atomic file writing and small JSON/model helpers shared by every stage.

Every output is written to a temporary name in the same directory and renamed into
place, so a killed job never leaves a half-written file under the final name, and a
model that exists is a model that was finished.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from paravg.errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` on success.

    The temporary keeps ``suffix`` (e.g. ``.npy``) for writers that insist on one.
    On an exception the temporary is removed and ``path`` is left untouched; a full disk
    (``ENOSPC``, ``EDQUOT``) is re-raised as an ``OSError`` that says so, names ``path``
    and how to resume.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600; give the final file the usual umask-based mode.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full_error(path) from exc
        raise


def disk_full_error(path: str | os.PathLike) -> OSError:
    """The error of a write that found the disk (or quota) full."""
    return OSError(
        errno.ENOSPC,
        f"no space left on the device (or quota) of {Path(path).parent} while writing "
        f"{Path(path).name}; nothing was left under that name. Free space there and run "
        "the same command again: only the unfinished jobs rerun",
        str(path),
    )


def preallocate(path: str | os.PathLike, size: int) -> None:
    """Reserve ``size`` bytes of the file ``path`` on disk (``posix_fallocate``), so a
    memory-mapped writer meets a full disk here, as an ``OSError``, instead of dying of
    ``SIGBUS`` on its first write to an unbacked page."""
    fd = os.open(path, os.O_RDWR)
    try:
        if size > 0:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented, key-sorted JSON (stable bytes for reruns)."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """Read a JSON file, naming the file in the error if it is not valid JSON."""
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 (hex) of a file's bytes, read in 1 MB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save_torch_atomic(path: str | os.PathLike, obj: Any) -> str:
    """``torch.save`` to a temporary name, then rename; the sha256 of the bytes written
    (the writer records it in its JSON: :mod:`paravg.provenance`).

    Serialised through memory: ``torch.save`` to a path names the zip records after the
    file, and the temporary name is random, so the bytes would differ between reruns.
    """
    import hashlib
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getvalue()
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
