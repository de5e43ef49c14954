"""One experiment's training curves as a TensorBoard event file, kept up to date per model.

``results/tb/<exp>/events.out.tfevents.paravg`` (:meth:`paravg.layout.Layout.tensorboard_events`,
format in :mod:`paravg.tensorboard`) holds one event per model ``<t>.pt``, at step t, with
the scalars of the per-iteration JSON files (the same ones the report's figures read):

* ``train/logprob``, ``train/accuracy``, ``valid/logprob``, ``valid/accuracy``: of
  ``diag/<t>.json`` (Kaldi's ``nnet3-compute-prob`` on ``train_diag``/``valid_diag``);
* for t ≥ 1, of iteration t − 1, which produced ``<t>.pt``: ``schedule/lr`` (the mean
  per-job learning rate of ``<t>/job<j>.json``), ``schedule/num_jobs``, ``jobs/objf_mean``
  and ``jobs/accuracy_mean`` (the jobs' training objective and accuracy), and of the sync
  node's summary (``sync/<t>.json``, or ``consensus/<t>.json`` for methods without a
  fan-in): ``sync/accepted`` and ``sync/rejected`` (counts of jobs) and ``sync/<key>``
  for every other number it holds (BMUF's ``block_momentum``, ``block_lr``,
  ``block_step_norm``, ``delta_norm``; whatever a method adds).

The diagnostics rule calls :func:`append_new_steps` after writing ``diag/<t>.json``.
Diagnostics run off the critical path, several at a time and out of order, so each call
takes a lock (``fcntl.flock`` on ``.lock`` beside the file) and appends the steps after
the file's last one for which ``diag/<s>.json`` exists, stopping at the first missing:
the file holds steps 0, 1, … in order, each once, whichever diagnostic finishes last
writes the rest, and a resumed run (whose diagnostics below the frontier are not run
again) appends only steps it lacks. Appending rather than rewriting keeps every record that
TensorBoard already read, and a crash loses at most the record being written (torn
tails are cut before the next append). A step whose diagnostic values no longer match
``diag/<t>.json`` (an experiment trained again from an earlier model after a change of
its config) is stale: the file is cut before the first such step, atomically (written
beside it, then renamed), and rebuilt from there. A deleted file is rebuilt from step 0
by the next diagnostic.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import struct
from pathlib import Path

from paravg.io import read_json
from paravg.layout import Layout
from paravg.sync.nodes import node_summary_kinds
from paravg.tensorboard import EventWriter, decode_event, read_records, rewrite_records

log = logging.getLogger(__name__)


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _read(path: str) -> dict | None:
    try:
        data = read_json(path)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _mean(values) -> float | None:
    finite = [x for x in (_number(v) for v in values) if x is not None]
    return sum(finite) / len(finite) if finite else None


def step_scalars(
    layout: Layout, exp: str, t: int, diag_only: bool = False
) -> dict[str, float] | None:
    """The scalars of step t (model ``<t>.pt``), or None while ``diag/<t>.json`` is not
    there (missing or not readable yet); ``diag_only``: only those of the diagnostic.
    Values that are missing or not finite are left out, never invented."""
    diag = _read(layout.diag(exp, t))
    if diag is None:
        return None
    scalars: dict[str, float | None] = {}
    for subset in ("train", "valid"):
        stats = diag.get(subset) or {}
        for key in ("logprob", "accuracy"):
            scalars[f"{subset}/{key}"] = _number(stats.get(key))
    if t >= 1 and not diag_only:
        jobs = [_read(p) for p in layout.existing("job_stats", exp, t).values()]
        jobs = [j for j in jobs if j is not None]
        scalars["schedule/lr"] = _mean(j.get("lr") for j in jobs)
        scalars["jobs/objf_mean"] = _mean(j.get("objf") for j in jobs)
        scalars["jobs/accuracy_mean"] = _mean(j.get("accuracy") for j in jobs)
        sync = next(
            (s for k in node_summary_kinds() if (s := _read(getattr(layout, k)(exp, t)))),
            None,
        )
        if sync is None:
            scalars["schedule/num_jobs"] = float(len(jobs)) if jobs else None
        else:
            objfs = sync.get("objfs")
            n = len(objfs) if isinstance(objfs, list) else len(jobs)
            scalars["schedule/num_jobs"] = float(n) if n else None
            for key in ("accepted", "rejected"):
                if isinstance(sync.get(key), list):
                    scalars[f"sync/{key}"] = float(len(sync[key]))
            for key, value in sync.items():
                if key != "iteration" and f"sync/{key}" not in scalars:
                    scalars[f"sync/{key}"] = _number(value)
    return {k: v for k, v in scalars.items() if v is not None}


DIAG_TAGS = tuple(f"{s}/{k}" for s in ("train", "valid") for k in ("logprob", "accuracy"))


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _cut_stale_steps(layout: Layout, exp: str, path: Path) -> None:
    """Keep the file's events up to the first step that is out of order or whose
    diagnostic values differ from ``diag/<t>.json`` now (as float32), and cut the rest."""
    if not path.exists():
        return
    records, _ = read_records(path)
    keep, expected = [], 0
    for data in records:
        event = decode_event(data)
        if event.scalars:
            diag = step_scalars(layout, exp, event.step, diag_only=True)
            if event.step != expected or diag is None:
                break
            current = {k: _float32(v) for k, v in diag.items()}
            if {k: event.scalars[k] for k in DIAG_TAGS if k in event.scalars} != current:
                break
            expected += 1
        keep.append(data)
    else:
        return
    log.warning("%s: steps from %d on are stale (trained again): rewritten", path, expected)
    rewrite_records(path, keep)


def append_new_steps(layout: Layout, exp: str) -> list[int]:
    """Append to ``exp``'s event file every step after its last one whose diagnostic
    exists, in order, up to the first missing; return the steps appended."""
    path = Path(layout.tensorboard_events(exp))
    path.parent.mkdir(parents=True, exist_ok=True)
    # not <file>.lock: TensorBoard reads every file whose name holds "tfevents"
    with open(path.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            _cut_stale_steps(layout, exp, path)
            writer = EventWriter(path)
        except ValueError as exc:
            raise ValueError(
                f"{exc}: the TensorBoard event file is damaged; delete it and the next "
                "diagnostic rewrites it from every diagnostic so far"
            ) from exc
        t = max(writer.steps, default=-1) + 1
        appended = []
        while (scalars := step_scalars(layout, exp, t)) is not None:
            wall_time = os.stat(layout.diag(exp, t)).st_mtime
            writer.add_scalars(t, scalars, wall_time=wall_time)
            appended.append(t)
            t += 1
    if appended:
        log.info("%s: steps %d..%d appended", path, appended[0], appended[-1])
    return appended
