"""Egs loading speed: minibatch assembly vs the raw read rate of the same archive.

Writes one synthetic archive (Kaldi-like geometry: 40-dim features stored as float16,
frames_per_eg 8, stored context 13/9, 100-dim i-vectors), warms the page cache, then
measures in the same run:

* raw read: ``numpy.load`` of every field of the archive into memory (the bytes a job
  would have to read anyway);
* frame_minibatches: one training pass (frame k, buffer shuffle, minibatches; Kaldi's
  ``nnet3-copy-egs --frame | nnet3-shuffle-egs | nnet3-merge-egs``), float32 tensors out;
* all_frame_minibatches: a diagnostics pass (all 8 frames of every eg).

Rates are egs per second (a training pass uses one frame of each eg, so egs/s is also
training frames/s); ratio = rate / raw-read rate. Target: frame_minibatches >= 0.5.
torch runs with one thread by default, as in the train_job rule (``threads: 1``).

    .venv/bin/python benchmarks/bench_egs.py [--num-egs 200000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from paravg.egs import EgsArchive, all_frame_minibatches, frame_minibatches
from paravg.egs.archive import ArchiveMeta, ArchiveWriter, archive_files
from paravg.egs.shuffle import buffer_shuffle_order


def write_synthetic(prefix: Path, n: int, F: int, lc: int, rc: int, D: int, ivec: int) -> None:
    meta = ArchiveMeta(n, F, lc, rc, D, ivec, "float16")
    rng = np.random.default_rng(0)
    with ArchiveWriter(prefix, meta) as w:
        step = 20000
        for s in range(0, n, step):
            e = min(n, s + step)
            w.arrays["feats"][s:e] = rng.standard_normal((e - s, meta.window, D)).astype(np.float16)
            w.arrays["labels"][s:e] = rng.integers(0, 3000, (e - s, F))
            w.arrays["weights"][s:e] = 1.0
            if ivec:
                w.arrays["ivectors"][s:e] = rng.standard_normal((e - s, ivec))
        w.set_keys([f"u-{i}" for i in range(n)])


def timed_interleaved(fns: list, repeats: int) -> list[float]:
    """Median seconds of each function, the functions run in turn ``repeats`` times (so a
    change in machine load hits all of them alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-egs", type=int, default=200000)
    p.add_argument("--feat-dim", type=int, default=40)
    p.add_argument("--ivector-dim", type=int, default=100)
    p.add_argument("--frames-per-eg", type=int, default=8)
    p.add_argument("--left-context", type=int, default=13)
    p.add_argument("--right-context", type=int, default=9)
    p.add_argument("--minibatch", type=int, default=256)
    p.add_argument("--buffer", type=int, default=5000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (train jobs use 1)")
    p.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)

    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        prefix = Path(tmp) / "egs.0"
        n, lc, rc = a.num_egs, a.left_context, a.right_context
        write_synthetic(prefix, n, a.frames_per_eg, lc, rc, a.feat_dim, a.ivector_dim)
        files = [
            f for k, f in archive_files(prefix, a.ivector_dim > 0).items() if f.endswith(".npy")
        ]
        nbytes = sum(Path(f).stat().st_size for f in files)

        def raw() -> None:
            for f in files:
                np.load(f)

        archive = EgsArchive(prefix)

        def frame_pass() -> None:
            for _mb in frame_minibatches(archive, 3, lc, rc, a.minibatch, a.buffer, seed=1):
                pass

        def all_pass() -> None:
            for _mb in all_frame_minibatches(archive, lc, rc, a.minibatch):
                pass

        def order_only() -> None:
            buffer_shuffle_order(n, a.buffer, 1)

        raw()  # warm the page cache
        frame_pass()
        seconds = timed_interleaved([raw, order_only, frame_pass, all_pass], a.repeats)
        counts = [n, n, n // a.minibatch * a.minibatch, n]
        names = [
            "raw read (numpy.load, all fields)",
            "buffer-shuffle order only",
            "frame_minibatches (training pass)",
            "all_frame_minibatches (diagnostics)",
        ]
        rows = list(zip(names, seconds, counts, strict=True))

    base = rows[0][2] / rows[0][1]
    print(
        f"archive: {n} egs, window {lc}+{a.frames_per_eg}+{rc} x {a.feat_dim} float16, "
        f"i-vector {a.ivector_dim}, {nbytes / 2**20:.0f} MiB; minibatch {a.minibatch}, "
        f"buffer {a.buffer}; torch threads {a.threads}; median of {a.repeats} interleaved runs"
    )
    print(f"{'what':40s} {'seconds':>9s} {'egs/s':>12s} {'MiB/s read':>11s} {'ratio':>7s}")
    for name, sec, count in rows:
        rate = count / sec
        mib = nbytes / 2**20 / sec if name.startswith("raw") else float("nan")
        print(f"{name:40s} {sec:9.3f} {rate:12.0f} {mib:11.0f} {rate / base:7.2f}")
    ratio = rows[2][2] / rows[2][1] / base
    print(
        f"target: frame_minibatches >= 0.5 x raw read rate: {'MET' if ratio >= 0.5 else 'NOT MET'}"
        f" ({ratio:.2f})"
    )


if __name__ == "__main__":
    main()
