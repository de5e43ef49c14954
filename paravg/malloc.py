"""glibc's ``malloc`` set for a job that streams chunk-sized numpy temporaries.

glibc serves a request of at least ``M_MMAP_THRESHOLD`` bytes with a mapping of its own,
returned to the system when freed, and a smaller one from the heap (``malloc(3)``,
``mallopt(3)``). By default the threshold moves: freeing a mapped block raises it to
that block's size (up to 32 MiB on 64-bit). A job that frees a chunk's temporaries
then takes the next chunk's, of other sizes (a pdf's frames, its components'
likelihoods), from the heap, where they fragment it: the peak RSS grows with the number
of chunks, not their size. ``gmm_acc`` measured 158 → 216 MiB from 2 h to 8 h of audio
at a fixed 100,000-frame chunk, its Python/numpy peak (tracemalloc) flat at 119.8 MiB;
with the threshold fixed at 128 KiB, 154 → 161 MiB
(``benchmarks/bench_data_scale.py``, docs/gmm.md).

:func:`fix_mmap_threshold` sets the threshold, which also turns the moving rule off
(``mallopt(M_MMAP_THRESHOLD, n)``, as the environment variable
``MALLOC_MMAP_THRESHOLD_`` does at start-up): every temporary of 128 KiB or more is
mapped and unmapped, so the heap holds only small objects. It applies to the calling
process only (a job forked from the warm executor sets it in itself). Not for training
jobs: torch's many tensors above 128 KiB would each cost a mapping.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # <malloc.h>
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's starting value, held fixed


def fix_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold of this process at ``nbytes``; False where the C
    library is not glibc (nothing changed)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # not glibc: no mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, nbytes) == 1
