"""The GMM jobs' malloc setting (paravg.malloc): with the threshold fixed, a temporary
above it is mapped even after a larger one was freed, which glibc's moving threshold
would have served from the heap (the fragmentation that made gmm_acc's peak grow with
the corpus). Each case runs in a fresh interpreter: the setting is per process."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
from paravg.malloc import fix_mmap_threshold

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

try:
    libc = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc
    sys.exit(3)
if not hasattr(libc, "mallinfo2"):  # glibc before 2.33
    sys.exit(3)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
if sys.argv[1] == "fixed" and not fix_mmap_threshold():
    sys.exit(3)  # not glibc
big = libc.malloc(4 << 20)  # 4 MiB: above the threshold either way, mapped
libc.free(big)  # glibc's moving rule: the threshold rises to 4 MiB
before = libc.mallinfo2().hblkhd
chunk = libc.malloc(1 << 20)  # 1 MiB: mapped only under a threshold still at 128 KiB
print(libc.mallinfo2().hblkhd - before >= 1 << 20)
libc.free(chunk)
"""


def _mapped(mode: str) -> bool:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True)
    if out.returncode == 3:
        pytest.skip("the C library is not glibc 2.33 or later")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip() == "True"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_a_fixed_threshold_keeps_chunk_sized_temporaries_off_the_heap():
    assert not _mapped("default")  # glibc's moving threshold: the heap serves it
    assert _mapped("fixed")
