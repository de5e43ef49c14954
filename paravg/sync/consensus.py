"""The consensus model of the decentralized methods: the mean of all jobs' end models.

Decentralized methods (``ring``, ``random-ring``, ``delay-by-one``, ``d-psgd``) have no
synced model on the critical path. For diagnostics, the EMA and the final combination we
compute, off the critical path (no train job reads it),

    c^{t+1} = (1/|A|) Σ_{j∈A} w_j^t      → ``consensus/<t+1>.pt``

over the usable jobs A of iteration t: readable, finite, and with objf_j ≥ max objf − θ
(Kaldi's rule, so one diverged job cannot spoil the model we report). Unlike ``average``
there is no "best job at iteration 0" rule: the consensus is a diagnostic of where the
learners are, not a start model. On a ring the mixing preserves the mean, so c^{t+1} is
also the mean of the next iteration's start models.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from paravg.io import save_torch_atomic, write_json_atomic
from paravg.provenance import record_of
from paravg.sync.average import NoAcceptableJobError, select_jobs, stream_jobs
from paravg.sync.tensors import file_header


def consensus_model(
    model_paths: Sequence[str | Path],
    stats_paths: Sequence[str | Path],
    iteration: int,
    threshold: float,
    model_out: str | Path,
    summary_out: str | Path,
    plan: dict | None = None,
) -> dict:
    """Write the consensus of iteration ``iteration``'s jobs and a summary (with ``plan``,
    the record of the plan its inputs carry); return the summary."""
    # iteration ≥ 1 disables the "best job at iteration 0" rule of ``average``
    jobs = stream_jobs(
        model_paths,
        stats_paths,
        iteration,
        lambda o: select_jobs(o, iteration=max(iteration, 1), threshold=threshold),
        weight=lambda n: 1.0 / n,
    )
    objfs, accepted, problems = jobs.objfs, jobs.accepted, jobs.problems
    if not accepted:
        raise NoAcceptableJobError(
            f"iteration {iteration}: no usable job for the consensus among {len(model_paths)}: "
            + "; ".join(problems or ["all objectives non-finite"])
        )
    out = {
        **file_header(jobs.header),
        "state_dict": jobs.total.result(),
        "meta": {"iteration": iteration + 1, "consensus_of": accepted},
    }
    digest = save_torch_atomic(model_out, out)
    summary = {
        **record_of("consensus", {model_out: digest}),
        "iteration": iteration,
        "method": "consensus",
        "objfs": objfs,
        "accepted": accepted,
        "rejected": [j for j in range(len(objfs)) if j not in accepted],
        "problems": problems,
    }
    if plan is not None:
        summary["plan"] = plan
    write_json_atomic(summary_out, summary)
    return summary


def consensus_node(
    files: dict, sync: dict, iteration: int, outputs: dict, plan: dict | None = None
) -> dict:
    """The ``consensus`` node of a decentralized method (:func:`consensus_model`)."""
    return consensus_model(
        files["models"],
        files["stats"],
        iteration,
        sync["objf_threshold"],
        outputs["model"],
        outputs["summary"],
        plan,
    )
