"""Shuffling and sampling egs: archive merge, buffer shuffle, reservoir subsets.

* :func:`merge_archive`: stage 5 of ``steps/nnet3/get_egs.sh``: archive a is the
  concatenation, in job order, of the egs every split job sent to it, then a full
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

from paravg.egs.archive import ArchiveWriter, open_arrays, read_keys
from paravg.egs.info import EgsInfo
from paravg.egs.make import meta_for
from paravg.egs.split import assignment_path

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
    """Gather archive ``archive``'s egs from the split jobs, shuffle fully, write it."""
    info = EgsInfo.load(info_path)
    if not 0 <= archive < info.num_archives:
        raise ValueError(f"archive {archive} out of range 0..{info.num_archives - 1}")
    rows_of_job = []
    for p in job_prefixes:
        assignment = np.load(assignment_path(p))
        rows_of_job.append(np.flatnonzero(assignment == archive))
    src_job = np.concatenate([np.full(len(r), j) for j, r in enumerate(rows_of_job)]).astype(int)
    src_row = np.concatenate(rows_of_job).astype(np.int64) if rows_of_job else np.zeros(0, int)
    n = len(src_row)
    perm = np.random.default_rng([info.srand + archive, MERGE_STREAM]).permutation(n)
    src_job, src_row = src_job[perm], src_row[perm]
    keys: list[str] = [""] * n
    meta = meta_for(info, n)
    with ArchiveWriter(out_prefix, meta) as writer:
        for j, p in enumerate(job_prefixes):
            positions = np.flatnonzero(src_job == j)
            positions = positions[np.argsort(src_row[positions], kind="stable")]
            rows = src_row[positions]
            # 1/num_archives of the split file is read: its sha256 would cost all of it
            # in every gather job (paravg.egs.archive, "Integrity")
            source = open_arrays(p, check=False)
            row_bytes = max(1, source["feats"][0:1].nbytes) if len(source["feats"]) else 1
            block = max(1, BLOCK_BYTES // row_bytes)
            for start in range(0, len(rows), block):
                pos_b, rows_b = positions[start : start + block], rows[start : start + block]
                for name, out in writer.arrays.items():
                    out[pos_b] = source[name][rows_b]
            job_keys = read_keys(p)
            for pos, row in zip(positions.tolist(), rows.tolist(), strict=True):
                keys[pos] = job_keys[row]
            del source, job_keys
        writer.set_keys(keys)
    log.info("archive %d: %d egs from %d split jobs", archive, n, len(job_prefixes))
    return n
