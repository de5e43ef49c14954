"""The start model of a decentralized job as paravg formed it before issue 37
(``gossip-average``, ``random-gossip-average``, ``d-psgd``).

The train job of these methods has no global model to read: its inputs are exactly the
job outputs named by the method's :meth:`~paravg.sync.registry.SyncMethod.start_inputs`.
This module mixes them inside the job (so no extra node lies on the critical path):

    mixed  = (1/|A|) Σ_{k∈A} x_k      A = usable neighbours within ``objf_threshold`` of
                                        the best neighbour (all of them, normally); after
                                        iteration 0 only the best (Kaldi's rule)
    s_j^t  = mixed,  x = w^{t−1}                        (gossip-average: adapt-then-combine)
    s_j^t  = mixed + (w_j^{t−1} − s_j^{t−1}),  x = s^{t−1}   (d-psgd)

(:mod:`paravg.sync.delay_by_one`). The objective of neighbour k's last job decides A.
Kaldi's rule makes the mixing row- but not doubly stochastic while it drops a neighbour
(the mean of the learners moves); the ADPSGD methods (``ring``, ``random-ring``,
``delay-by-one``) cut edges symmetrically instead (:mod:`paravg.sync.adpsgd`). d-psgd
mixes inside the train job, which keeps s_j^t as ``<t+1>/job<j>.start.pt`` where the
method reads it later.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from paravg.nnet.model_file import load_model_file
from paravg.sync.average import NoAcceptableJobError, load_job_results, select_jobs
from paravg.sync.delay_by_one import mix_plus_displacement
from paravg.sync.tensors import file_header, mean

log = logging.getLogger(__name__)


def mixed_start(
    mix_models: Sequence[str | Path],
    mix_stats: Sequence[str | Path] | None,
    mix_iteration: int,
    threshold: float,
    own_end: str | Path | None = None,
    own_start: str | Path | None = None,
) -> tuple[dict, dict]:
    """The start model file dict s_j^t and a record of how it was formed.

    ``mix_stats`` None: no job's objective stands behind the models (delay-by-one's
    s_k^{t−1} before t = 3 are all ``0.pt``), so every one is mixed.
    """
    if (own_end is None) != (own_start is None):
        raise ValueError("a displacement needs both the own job's end model and its start model")
    if mix_stats is None:
        models, problems = [load_model_file(p) for p in mix_models], []
        accepted = list(range(len(models)))
    else:
        models, objfs, problems = load_job_results(mix_models, mix_stats, mix_iteration)
        # Kaldi's "best job at iteration 0" holds here too (averaging models right after
        # the initialisation hurts): the start after iteration 0 is the neighbourhood's best
        accepted = select_jobs(objfs, iteration=mix_iteration, threshold=threshold)
    if not accepted:
        raise NoAcceptableJobError(
            f"iteration {mix_iteration}: no usable neighbour among {[str(p) for p in mix_models]}: "
            + "; ".join(problems or ["all objectives non-finite"])
        )
    mixed = mean([models[k]["state_dict"] for k in accepted])
    record = {
        "mixed": [str(mix_models[k]) for k in accepted],
        "rejected": [str(mix_models[k]) for k in range(len(mix_models)) if k not in accepted],
        "problems": problems,
    }
    if own_end is not None:
        end, start = load_model_file(own_end), load_model_file(own_start)
        mixed = mix_plus_displacement(mixed, end["state_dict"], start["state_dict"])
        record["own_progress"] = [str(own_end), str(own_start)]
    out = {**file_header(models[accepted[0]]), "state_dict": mixed, "meta": {"start": record}}
    return out, record


def start_model(inputs: dict, iteration: int, sync_cfg: dict) -> tuple[dict, dict]:
    """s_j^t of a decentralized job of ``iteration`` ≥ 1 from the start inputs the registry
    names: the neighbours' end models of t − 1 (gossip-average) or start models of t − 1
    (d-psgd: with their jobs' statistics, and the own job's end and start models whose
    displacement is added)."""
    own_end = (inputs.get("own_end") or [None])[0]
    own_start = (inputs.get("own_start") or [None])[0]
    return mixed_start(
        inputs["models"],
        inputs.get("stats"),
        iteration - 1,
        sync_cfg["objf_threshold"],
        own_end,
        own_start,
    )
