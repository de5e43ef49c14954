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
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

from paravg.errors import TrainingError
from paravg.io import read_json
from paravg.sync.tensors import mean

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
    """Load every job's model and objective; unusable jobs become ``None`` with a reason."""
    from paravg.nnet.tdnn import load_model_file

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


def average_jobs(
    model_paths: Sequence[str | Path],
    stats_paths: Sequence[str | Path],
    iteration: int,
    threshold: float = 1.0,
) -> tuple[dict, dict]:
    """The synced model file dict of ``iteration``'s jobs and a summary for the JSON."""
    models, objfs, problems = load_job_results(model_paths, stats_paths, iteration)
    accepted = select_jobs(objfs, iteration, threshold)
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
    base = models[accepted[0]]
    synced = dict(base)
    synced["state_dict"] = mean([models[j]["state_dict"] for j in accepted])
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


def average_node(files: dict, sync: dict, iteration: int, outputs: dict) -> dict:
    """The ``average`` node (Kaldi's ``nnet3-average``): ``<t>.pt`` of ``iteration``'s jobs
    and its summary, off the critical path (the jobs of t formed the same model)."""
    from paravg.io import save_torch_atomic, write_json_atomic
    from paravg.provenance import checksums

    synced, summary = average_jobs(
        files["models"], files["stats"], iteration, sync["objf_threshold"]
    )
    digest = save_torch_atomic(outputs["model"], synced)
    summary["sha256"] = checksums({outputs["model"]: digest})
    write_json_atomic(outputs["summary"], summary)
    return summary
