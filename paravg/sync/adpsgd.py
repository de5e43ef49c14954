"""ADPSGD's start model (Cui et al.): mix the neighbours' current weights, add the own step.

Cui et al., *Asynchronous decentralized distributed training of acoustic models* (arXiv
2110.11199), after Lian et al.'s AD-PSGD (2018), write the learners' weights as the
columns of W and one step as

    W_{k+1} = W_k · T_k − α · g(W_{k−s})        (s = 0: synchronous; s = 1: one step stale)

with T_k a doubly stochastic mixing (AD-PSGD: a pairwise average, ½ and ½, of one
learner with one neighbour). The mixing acts on the *current* weights and the learner's
own gradient step is added after it: combine-then-adapt. In paravg one step is one
training job (K minibatches at N·ε), the weights of learner j at iteration t are its start
s_j^t, its step is its job's displacement Δ_j^t = w_j^t − s_j^t, and

    ring, random-ring:  s_j^{t+1} = Σ_k W^{t+1}_jk s_k^t + Δ_j^t            (s = 0)
    delay-by-one:       s_j^{t+1} = Σ_k W^{t+1}_jk s_k^t + Δ_j^{t−1}        (s = 1; Δ^{−1} = 0)

with W^{t+1} the mixing of the ring of iteration t + 1 (:mod:`paravg.sync.ring`;
``sync.mixing``: pairwise, the default, or the three-way neighbourhood). Averaged over the
learners, a doubly stochastic W gives m^{t+1} = m^t + mean_j Δ_j (one iteration late for
delay-by-one): the consensus moves as averaging's.

The neighbour rule. Neither paper drops a neighbour: the mixing weights are fixed, and
AD-PSGD's analysis needs T_k doubly stochastic (it keeps the mean of the learners). Kaldi
drops a job whose objective is more than ``objf_threshold`` below the best before
averaging, a guard against a diverged job. We keep that guard in a form that keeps W
symmetric and hence doubly stochastic: an *edge* (j, k) of the mixing is cut when the
two learners' objectives differ by more than ``objf_threshold``, or either is unusable
(unreadable, non-finite); the weight of a cut edge goes back to both ends' own weight:

    W_jk = 1/|G_j| for k ∈ G_j \\ {j} with |objf_j − objf_k| ≤ θ, else 0;
    W_jj = 1 − Σ_{k≠j} W_jk

(G_j: j's pair or neighbourhood; |G_j| the same for all learners of a mixing except a
learner left out of a matching, whose row is its own). Both ends of an edge see the same
two objectives, so they cut it together. In a pair this is Kaldi's rule exactly (the
worse of two more than θ below the better is dropped), and the worse learner keeps its
own model instead of taking the better one's (which would move the mean). The
objectives are, for s^{t+1}, those of the jobs of t, which trained from the mixed starts
s^t (ring, random-ring; every s_k^0 is ``0.pt``, so a cut at t = 0 changes nothing), or
for delay-by-one those of the jobs of t − 2, whose progress the starts s^t hold (its mix
node must not wait for the jobs of t; none before s^3: s^1 = s^0 = ``0.pt``). A large
threshold (1000) switches the rule off.

``paravg.sync.decentralized`` keeps paravg's form before issue 37 (``gossip-average``,
``random-gossip-average``, ``d-psgd``: Kaldi's row-stochastic rule).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

from paravg.nnet.model_file import load_model_file
from paravg.sync.average import read_job_objectives
from paravg.sync.tensors import file_header, weighted_sum

log = logging.getLogger(__name__)


def edge_weights(objfs: Sequence[float | None], threshold: float) -> list[float]:
    """Row j of W for the group [j, k_1, k_2, …] (own first, ``objfs`` in that order,
    None for an unusable job): 1/|G| for every neighbour whose edge stands, the rest on j."""
    own = objfs[0]

    def stands(o: float | None) -> bool:
        usable = own is not None and o is not None and math.isfinite(own) and math.isfinite(o)
        return usable and abs(own - o) <= threshold

    row = [1.0 / len(objfs) if stands(o) else 0.0 for o in objfs[1:]]
    return [1.0 - sum(row), *row]


def mixed_start(
    models: Sequence[str | Path],
    stats: Sequence[str | Path] | None,
    mix_iteration: int,
    threshold: float,
    own_end: str | Path | None = None,
    own_start: str | Path | None = None,
) -> tuple[dict, dict]:
    """s_j = Σ_k W_jk x_k (+ w − s of the own job) as a model file dict, and its record.

    ``models``: the group's models, the learner's own first; ``stats``: their jobs'
    statistics (same order), None when no job stands behind them; ``mix_iteration``: the
    iteration of those jobs (for the log). Summed once in float64, cast to the dtype of
    the learner's own model.
    """
    if (own_end is None) != (own_start is None):
        raise ValueError("a displacement needs both the own job's end model and its start model")
    if stats is None:
        weights, problems = [1.0 / len(models)] * len(models), {}
    else:
        objfs, problems = read_job_objectives(stats, mix_iteration)
        weights = edge_weights(objfs, threshold)
    used = [k for k, c in enumerate(weights) if k == 0 or c != 0.0]
    files = [load_model_file(models[k]) for k in used]
    terms, coefs = [f["state_dict"] for f in files], [weights[k] for k in used]
    record = {
        "mixed": [str(models[k]) for k in used],
        "weights": list(coefs),
        "cut": [str(models[k]) for k in range(1, len(models)) if k not in used],
        "problems": list(problems.values()),
    }
    if own_end is not None:
        terms += [load_model_file(own_end)["state_dict"], load_model_file(own_start)["state_dict"]]
        coefs += [1.0, -1.0]
        record["own_progress"] = [str(own_end), str(own_start)]
    if record["cut"]:
        log.warning("iteration %d: edges cut (objectives): %s", mix_iteration, record["cut"])
    start = weighted_sum(terms, coefs)
    return {**file_header(files[0]), "state_dict": start, "meta": {"start": record}}, record


def start_model(inputs: dict, iteration: int, sync_cfg: dict) -> tuple[dict, dict]:
    """s_j^t of an ADPSGD job (or mix node) of ``iteration`` ≥ 1 from the start inputs
    the registry names: the group's starts (own first) with their jobs' statistics, and
    the own job's end and start models whose displacement is added. The statistics are
    of iteration t − 1 for ring and random-ring (the jobs that trained from the mixed
    starts s^{t−1}), t − 3 for delay-by-one (the jobs whose progress s^{t−1} holds)."""
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


def mix_node(files: dict, sync: dict, iteration: int, outputs: dict, plan: dict) -> None:
    """The mix node of (``iteration``, j) (the ``mix_node`` kind of
    :data:`paravg.sync.nodes.NODE_KINDS`, run by :func:`~paravg.sync.nodes.run_node`,
    which has checked the neighbours' statistics): delay-by-one's s_j^iteration from the
    files the registry's ``mix_inputs`` names, written atomically to ``outputs["model"]``,
    then its record (how it was formed, its sha256, the plan's ``fingerprint`` and
    ``sync``) to ``outputs["record"]``."""
    from paravg.io import save_torch_atomic, write_json_atomic
    from paravg.provenance import record_of

    start, record = start_model(files, iteration, sync)
    digest = save_torch_atomic(outputs["model"], start)
    write_json_atomic(
        outputs["record"],
        {
            "start": record,
            **record_of("mix_node", {outputs["model"]: digest}),
            "plan": {"fingerprint": plan["fingerprint"], "sync": sync},
        },
    )
