"""A full disk while a model or an egs archive is written: a clear OSError, nothing left.

Needs a small tmpfs (mount as root); skipped where mounting is impossible.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs at tmp_path/small (unmounted afterwards)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_model_write_on_a_full_disk_fails_clearly_and_leaves_nothing(small_disk):
    import torch

    from paravg.io import save_torch_atomic

    with pytest.raises(OSError, match=r"no space left .* while writing 7\.pt") as info:
        save_torch_atomic(small_disk / "7.pt", {"w": torch.zeros(200_000)})
    assert info.value.errno == errno.ENOSPC
    assert list(small_disk.iterdir()) == []
    save_torch_atomic(small_disk / "7.pt", {"w": torch.zeros(10)})  # fits: written
    assert [p.name for p in small_disk.iterdir()] == ["7.pt"]


def test_egs_archive_on_a_full_disk_is_an_error_not_sigbus(small_disk):
    """The archive writer fills memory-mapped files: without preallocation a full tmpfs
    killed the job with SIGBUS and left its temporaries behind."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from paravg.egs.archive import ArchiveMeta, ArchiveWriter
        meta = ArchiveMeta(num_egs=20000, frames_per_eg=8, left_context=4,
                           right_context=4, feat_dim=40, ivector_dim=0,
                           feats_dtype="float16")
        with ArchiveWriter({str(small_disk / "egs.0")!r}, meta) as w:
            for a in w.arrays.values():
                a[...] = 1
            w.set_keys([f"k{{i}}" for i in range(20000)])
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])  # -7: SIGBUS
    assert "no space left on the device" in proc.stderr
    assert "while writing egs.0.feats.npy" in proc.stderr
    assert list(small_disk.iterdir()) == []
