"""Kaldi's model averaging (the default sync method, ``nnet3-average``).

``steps/libs/nnet3/train/common.py: get_successful_models`` and
``frame_level_objf/common.py: train_one_iteration``: with objf_j the average training
objective of job j, accept every job with max_k objf_k − objf_j ≤ threshold (1.0), and
set the next model to the plain arithmetic mean of the accepted jobs' parameters
(buffers too). On iteration 0 the best job is taken instead, because "model averaging
isn't always helpful when the model is changing too fast".

A job whose model file is unreadable or truncated, or whose parameters or objective are
not finite, is excluded with a warning (never averaged); an iteration with no acceptable
job is an error naming the iteration and every job.

The models are read one at a time into a running float64 sum (:func:`stream_jobs`): a
node or job averaging N models holds about three models' worth of memory, not N (Kaldi's
``nnet3-average`` reads its inputs one by one too). The objectives come first (the
statistics JSONs), so only the accepted jobs' models are read.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from paravg.errors import DataError, TrainingError
from paravg.io import read_json
from paravg.sync.tensors import RunningSum

log = logging.getLogger(__name__)


class NoAcceptableJobError(TrainingError):
    """Every job of an iteration diverged or was unreadable."""


def select_jobs(objfs: Sequence[float], iteration: int, threshold: float = 1.0) -> list[int]:
    """Indices of the accepted jobs: the best one at iteration 0, else all within ``threshold``."""
    finite = [j for j, o in enumerate(objfs) if o is not None and math.isfinite(o)]
    if not finite:
        return []
    best = max(finite, key=lambda j: (objfs[j], -j))
    if iteration == 0:
        return [best]
    return [j for j in finite if objfs[best] - objfs[j] <= threshold]


def load_job_results(
    model_paths: Sequence[str | Path], stats_paths: Sequence[str | Path], iteration: int
) -> tuple[list[dict | None], list[float | None], list[str]]:
    """Load every job's model and objective; unusable jobs become ``None`` with a reason
    (the decentralized mixing of a few neighbours: all of them in memory)."""
    from paravg.nnet.model_file import load_model_file

    models: list[dict | None] = []
    objfs: list[float | None] = []
    problems: list[str] = []
    for j, (mp, sp) in enumerate(zip(model_paths, stats_paths, strict=True)):
        try:
            stats = read_json(sp)
            objf = float(stats["objf"])
            if not math.isfinite(objf):
                raise ValueError(f"{sp}: non-finite objective {objf} (diverged)")
            models.append(load_model_file(mp))
            objfs.append(objf)
        except (ValueError, KeyError, OSError) as exc:
            problems.append(f"job {j}: {exc}")
            log.warning("iteration %d: excluding job %d: %s", iteration, j, exc)
            models.append(None)
            objfs.append(None)
    return models, objfs, problems


def read_job_objectives(
    stats_paths: Sequence[str | Path], iteration: int
) -> tuple[list[float | None], dict[int, str]]:
    """Every job's objective from its statistics (``None`` and a reason when unusable)."""
    objfs: list[float | None] = []
    problems: dict[int, str] = {}
    for j, sp in enumerate(stats_paths):
        try:
            objf = float(read_json(sp)["objf"])
            if not math.isfinite(objf):
                raise ValueError(f"{sp}: non-finite objective {objf} (diverged)")
            objfs.append(objf)
        except (ValueError, KeyError, OSError) as exc:
            problems[j] = f"job {j}: {exc}"
            log.warning("iteration %d: excluding job %d: %s", iteration, j, exc)
            objfs.append(None)
    return objfs, problems


class _UnreadableModelError(DataError):
    def __init__(self, job: int, reason: Exception) -> None:
        super().__init__(str(reason))
        self.job = job


@dataclass
class StreamedJobs:
    """The accepted jobs of an iteration summed one model at a time (:func:`stream_jobs`)."""

    header: dict | None  # the first accepted model's file dict, its state_dict None
    total: RunningSum
    objfs: list[float | None]
    accepted: list[int]
    problems: list[str]  # in job order


def stream_jobs(
    model_paths: Sequence[str | Path],
    stats_paths: Sequence[str | Path],
    iteration: int,
    select: Callable[[list[float | None]], list[int]],
    weight: Callable[[int], float | None] = lambda n: None,
) -> StreamedJobs:
    """Read the objectives, choose the jobs (``select``), then add their models one at a
    time, each times ``weight(number chosen)`` (None: 1). A model that cannot be read (or
    has non-finite parameters) excludes its job, and the choice is made again without it."""
    from paravg.nnet.model_file import load_model_file

    objfs, problems = read_job_objectives(stats_paths, iteration)
    while True:
        accepted = select(objfs)
        total, header = RunningSum(), None
        try:
            for j in accepted:
                try:
                    model = load_model_file(model_paths[j])
                except (ValueError, KeyError, OSError) as exc:
                    raise _UnreadableModelError(j, exc) from None
                if header is None:  # its keys in order, the parameters left out
                    header = {k: None if k == "state_dict" else v for k, v in model.items()}
                total.add(model["state_dict"], weight(len(accepted)))
                del model
        except _UnreadableModelError as bad:
            problems[bad.job] = f"job {bad.job}: {bad}"
            log.warning("iteration %d: excluding job %d: %s", iteration, bad.job, bad)
            objfs[bad.job] = None
            continue
        ordered = [problems[j] for j in sorted(problems)]
        return StreamedJobs(header, total, objfs, accepted, ordered)


def average_jobs(
    model_paths: Sequence[str | Path],
    stats_paths: Sequence[str | Path],
    iteration: int,
    threshold: float = 1.0,
) -> tuple[dict, dict]:
    """The synced model file dict of ``iteration``'s jobs and a summary for the JSON."""
    jobs = stream_jobs(
        model_paths, stats_paths, iteration, lambda o: select_jobs(o, iteration, threshold)
    )
    objfs, accepted, problems = jobs.objfs, jobs.accepted, jobs.problems
    if not accepted:
        raise NoAcceptableJobError(
            f"iteration {iteration}: no acceptable job among {len(model_paths)}: "
            + "; ".join(problems or ["all objectives non-finite"])
        )
    rejected = [j for j in range(len(objfs)) if j not in accepted]
    if rejected and iteration > 0:
        log.warning(
            "iteration %d: rejected jobs %s (objectives %s; best %.4f)",
            iteration,
            rejected,
            [objfs[j] for j in rejected],
            max(objfs[j] for j in accepted),
        )
    synced = {**jobs.header, "state_dict": jobs.total.result(divide=True)}  # keys in order
    summary = {
        "iteration": iteration,
        "objfs": objfs,
        "accepted": accepted,
        "rejected": rejected,
        "problems": problems,
        "method": "best" if iteration == 0 else "average",
    }
    return synced, summary


def start_model(inputs: dict, iteration: int, sync_cfg: dict) -> tuple[dict, dict]:
    """s^t for every job of ``iteration`` ≥ 1: the Kaldi average of iteration t − 1's jobs,
    formed inside the job (the ``average`` node writes the same bits to ``<t>.pt``)."""
    return average_jobs(
        inputs["models"], inputs["stats"], iteration - 1, sync_cfg["objf_threshold"]
    )


def average_node(
    files: dict, sync: dict, iteration: int, outputs: dict, plan: dict | None = None
) -> dict:
    """The ``average`` node (Kaldi's ``nnet3-average``): ``<t>.pt`` of ``iteration``'s jobs
    and its summary (with ``plan``, the record of the plan its inputs carry), off the
    critical path (the jobs of t formed the same model)."""
    from paravg.io import save_torch_atomic, write_json_atomic
    from paravg.provenance import record_of

    synced, summary = average_jobs(
        files["models"], files["stats"], iteration, sync["objf_threshold"]
    )
    digest = save_torch_atomic(outputs["model"], synced)
    summary |= record_of("average", {outputs["model"]: digest})
    if plan is not None:
        summary["plan"] = plan
    write_json_atomic(outputs["summary"], summary)
    return summary
