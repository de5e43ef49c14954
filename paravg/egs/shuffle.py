"""Shuffling and sampling egs: archive merge, buffer shuffle, reservoir subsets.

* :func:`merge_archive`: stage 5 of ``steps/nnet3/get_egs.sh``: archive a is the
  concatenation, in job order, of the egs every split job sent to it (its pieces,
  :mod:`paravg.egs.pieces`, nothing else of the split files is read), then a full
  in-memory shuffle (``nnet3-shuffle-egs --srand=a+srand``, buffer size 0).
* :func:`buffer_shuffle_order`: the order in which ``nnet3-shuffle-egs --buffer-size=B``
  emits n egs. Each incoming eg i goes to slot s_i ~ UniformInt[0, B − 1]; if the slot is
  occupied, the occupant is emitted first; at the end the buffer is drained in slot order.
  So eg i is emitted when the next eg with the same slot arrives (at time j > i), or, if
  none, in the drain at position n + s_i: sorting by that key gives the whole order
  without a Python loop.
* :func:`reservoir_sample`: ``nnet3-subset-egs --n``: keep the first n; the k-th item
  (1-based) thereafter replaces a uniformly chosen kept item with probability n / k.
"""

from __future__ import annotations

import logging
import os

import numpy as np

from paravg.egs.archive import ArchiveWriter
from paravg.egs.info import EgsInfo
from paravg.egs.make import meta_for
from paravg.egs.pieces import open_piece

log = logging.getLogger(__name__)

MERGE_STREAM = 303
BLOCK_BYTES = 1 << 26  # rows gathered per step when merging: ~64 MB of features


def buffer_shuffle_order(n: int, buffer_size: int, seed: int) -> np.ndarray:
    """Emission order of ``nnet3-shuffle-egs --buffer-size`` (0 = full shuffle)."""
    rng = np.random.default_rng(seed)
    if buffer_size <= 0:
        return rng.permutation(n)
    slots = rng.integers(0, buffer_size, size=n)
    arrival = np.argsort(slots, kind="stable")  # grouped by slot, in arrival order
    slot_sorted = slots[arrival]
    has_next = np.zeros(n, dtype=bool)
    has_next[:-1] = slot_sorted[1:] == slot_sorted[:-1]
    key = np.empty(n, dtype=np.int64)
    evicted = arrival[has_next]
    key[evicted] = arrival[np.flatnonzero(has_next) + 1]  # emitted when its successor arrives
    key[arrival[~has_next]] = n + slot_sorted[~has_next]  # drained at the end, slot order
    # keys are distinct integers in [0, n + buffer_size): invert by scattering, no sort
    by_key = np.full(n + buffer_size, -1, dtype=np.int64)
    by_key[key] = np.arange(n)
    return by_key[by_key >= 0]


def reservoir_sample(num_items: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Indices kept by reservoir sampling n of ``num_items`` (reservoir order)."""
    if num_items <= n:
        return np.arange(num_items)
    reservoir = np.arange(n)
    items = np.arange(n, num_items)
    keep = rng.random(num_items - n) < n / (items + 1.0)
    slots = rng.integers(0, n, size=num_items - n)
    # later items overwrite earlier ones: per slot the largest kept item wins
    np.maximum.at(reservoir, slots[keep], items[keep])
    return reservoir


def merge_archive(
    archive: int,
    job_prefixes: list[str | os.PathLike],
    info_path: str | os.PathLike,
    out_prefix: str | os.PathLike,
) -> int:
    """Read archive ``archive``'s piece of each split job, shuffle fully, write it.

    Reads only its pieces (1/num_archives of the split files) and holds one archive's
    row indices and keys: memory and I/O per archive do not grow with the corpus.
    """
    info = EgsInfo.load(info_path)
    if not 0 <= archive < info.num_archives:
        raise ValueError(f"archive {archive} out of range 0..{info.num_archives - 1}")
    pieces = [open_piece(p, archive, info.num_archives) for p in job_prefixes]
    sizes = [len(keys) for _, keys in pieces]
    n = sum(sizes)
    # the concatenation of the pieces in job order, then a full shuffle
    src_job = np.repeat(np.arange(len(pieces)), sizes)
    src_row = np.concatenate([np.arange(s, dtype=np.int64) for s in sizes] or [np.zeros(0, int)])
    perm = np.random.default_rng([info.srand + archive, MERGE_STREAM]).permutation(n)
    src_job, src_row = src_job[perm], src_row[perm]
    key_width = max([keys.dtype.itemsize for _, keys in pieces] + [1])
    keys = np.zeros(n, dtype=f"S{key_width}")
    meta = meta_for(info, n)
    with ArchiveWriter(out_prefix, meta) as writer:
        for j, (source, job_keys) in enumerate(pieces):
            positions = np.flatnonzero(src_job == j)
            positions = positions[np.argsort(src_row[positions], kind="stable")]
            rows = src_row[positions]  # ascending: the piece is read in order
            row_bytes = max(1, source["feats"][0:1].nbytes) if len(source["feats"]) else 1
            block = max(1, BLOCK_BYTES // row_bytes)
            for start in range(0, len(rows), block):
                pos_b, rows_b = positions[start : start + block], rows[start : start + block]
                for name, out in writer.arrays.items():
                    out[pos_b] = source[name][rows_b]
            keys[positions] = job_keys[rows]
        writer.set_keys([k.decode("utf-8") for k in keys.tolist()])
    log.info("archive %d: %d egs from %d split jobs", archive, n, len(job_prefixes))
    return n
