"""A decentralized train job: form the start model from the neighbours, then train.

The ``train_job_decentralized`` rule of ``ring``, ``random-ring`` and ``delay-by-one`` has
no ``<t>.pt`` to read: its inputs are exactly the job outputs named by the method's
:class:`~paravg.sync.registry.StartRecipe`. This module mixes them (the "mix" step, inside
the job, so no extra node lies on the critical path), writes the start model s_j^t to
``<t+1>/job<j>.start.pt`` (delay-by-one reads it one iteration later) and runs the
ordinary train job from it:

    mixed  = (1/|A|) Σ_{k∈A} w_k      A = usable neighbours within ``objf_threshold`` of
                                        the best neighbour (all of them, normally)
    s_j^t  = mixed                                     (ring, random-ring; delay-by-one t = 1)
    s_j^t  = mixed + (w_j^{t−1} − s_j^{t−1})           (delay-by-one, t ≥ 2)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from paravg.io import save_torch_atomic
from paravg.nnet.tdnn import load_model_file
from paravg.sync.average import NoAcceptableJobError, load_job_results, select_jobs
from paravg.sync.delay_by_one import delay_by_one_start
from paravg.sync.ring import mix
from paravg.sync.tensors import file_header

log = logging.getLogger(__name__)


def start_model(
    mix_models: Sequence[str | Path],
    mix_stats: Sequence[str | Path],
    mix_iteration: int,
    threshold: float,
    own_end: str | Path | None = None,
    own_start: str | Path | None = None,
) -> tuple[dict, dict]:
    """The start model file dict s_j^t and a record of how it was formed."""
    if (own_end is None) != (own_start is None):
        raise ValueError("delay-by-one needs both the own job's end model and its start model")
    models, objfs, problems = load_job_results(mix_models, mix_stats, mix_iteration)
    # no "best job at iteration 0" rule here: that is ``average``'s, and DESIGN.md defines
    # the ring start as the plain mean of the neighbourhood (iteration=1 disables it)
    accepted = select_jobs(objfs, iteration=max(mix_iteration, 1), threshold=threshold)
    if not accepted:
        raise NoAcceptableJobError(
            f"iteration {mix_iteration}: no usable neighbour among {[str(p) for p in mix_models]}: "
            + "; ".join(problems or ["all objectives non-finite"])
        )
    mixed = mix([models[k]["state_dict"] for k in accepted])
    record = {
        "mixed": [str(mix_models[k]) for k in accepted],
        "rejected": [str(mix_models[k]) for k in range(len(mix_models)) if k not in accepted],
        "problems": problems,
    }
    if own_end is not None:
        end, start = load_model_file(own_end), load_model_file(own_start)
        mixed = delay_by_one_start(mixed, end["state_dict"], start["state_dict"])
        record["own_progress"] = [str(own_end), str(own_start)]
    out = {**file_header(models[accepted[0]]), "state_dict": mixed, "meta": {"start": record}}
    return out, record


def run_decentralized_job(
    initial: str | Path | None,
    mix_models: Sequence[str | Path],
    mix_stats: Sequence[str | Path],
    mix_iteration: int | None,
    threshold: float,
    own_end: str | Path | None,
    own_start: str | Path | None,
    start_out: str | Path,
    archive_prefix: str | Path,
    model_out: str | Path,
    stats_out: str | Path,
    spec,
    ngsgd: dict,
    device: torch.device,
) -> dict:
    """Write the start model to ``start_out``, then train from it (``run_train_job``).

    ``initial`` is the initial model ``0.pt`` at iteration 0 (then nothing is mixed).
    """
    from paravg.train_job import run_train_job

    if initial is not None:
        if mix_models or own_end is not None:
            raise ValueError("a job starts from the initial model or from a mixing, not both")
        start, record = load_model_file(initial), {"initial": str(initial)}
    else:
        start, record = start_model(
            mix_models, mix_stats, mix_iteration, threshold, own_end, own_start
        )
    log.info("job %d of iteration %d starts from %s", spec.job, spec.iteration, record)
    save_torch_atomic(start_out, start)
    stats = run_train_job(start_out, archive_prefix, model_out, stats_out, spec, ngsgd, device)
    return stats
