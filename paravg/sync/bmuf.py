"""Blockwise model-update filtering (BMUF; Chen & Huo, ICASSP 2016), one block per iteration.

Two forms (``sync.bmuf.form``); a is the Kaldi average of the block's end models (the same
job selection as ``average``: jobs within ``objf_threshold`` of the best, the best job alone
at iteration 0), s the model the block's jobs started from, N the jobs of the block.

**cntk** (the default; CNTK ``Source/1BitSGD/BlockMomentumSGD.h``, Chen & Huo's group's
code). G = Σ_j (w_j − s) = N · (a − s) (the jobs the selection rejected count at the
accepted mean), and on learnable parameters only:

    Δ ← bm · Δ + (1 − bm) · η_b · G
    g ← s + Δ                         (the base is the previous start, i.e. the look-ahead)
    s ← g + bm · Δ   (NBM, the default)   or   s ← g   (classic)

Buffers (batch-norm statistics, LDA, priors) are plainly averaged: g = s = a, Δ = 0, as
CNTK/fairseq filter learnable parameters only. Steady gain N · η_b for any bm; with NBM the
start moves s' = s + (1 + bm) · Δ', a steady (1 + bm)/(1 − bm) = 2N − 1 mean displacements
per block at the default bm. Every job runs at ε (CNTK's per-worker rate).

**Warm-up** (``warmup_blocks``, both forms; fairseq's ``warmup_iterations``): the first
blocks are plain averaging, g = s = a and Δ = 0, then the filter starts from Δ = 0. The
jobs keep the method's per-job rate throughout (fairseq keeps the worker rate too).

**textbook** (paravg's form before issue 37; every floating tensor filtered):

    Δ ← bm · Δ + η_b · (a − s)          (Δ = 0 and s = g = the initial model at first)
    g ← g + Δ
    s ← g + bm · Δ   (Nesterov, the default)   or   s ← g   (classic block momentum)

The block gradient a − s is taken from the model the jobs were given, as in Chen & Huo's
G(n) = W̄(n) − W_g(n−1) (CNTK). For classic BMUF s = g, which is DESIGN.md's "a − g". With
Nesterov, a − g would count the look-ahead bm·Δ a second time (a ≈ s + d = g + bm·Δ + d,
so Δ ← 2·bm·Δ + d grows by 2·bm = 1.5 per block at N = 4): that reading diverged on the
demo (‖Δ‖ doubling every two iterations, held-out log-prob −60 after 16 iterations), so
the rule reads the start model ``<t>.pt`` its jobs really used.

Defaults bm = 1 − 1/N (N = the number of jobs of the iteration being synced) and η_b = 1.
With bm = 0 and η_b = 1, s = g, Δ = a − g and g = a: exactly ``average``.

Relation of the two forms (exact, as maps of the start model; tests/unit/sync/test_bmuf.py):
cntk with NBM (bm, η_b) is textbook-classic (bm, N · η_b · (1 − bm) · (1 + bm)) on the mean,
i.e. classic (bm, η_b · (1 + bm)) at bm = 1 − 1/N: with E = (1 + bm) · Δ, E' = bm · E +
(1 + bm) · c · (a − s) and s' = s + E'. At the same per-job ε the cntk form moves 1 + bm
times further per block (1.75× at N = 4, 1.875× at N = 8).

**Per-job learning rate (textbook).** Kaldi gives each job lr = N · ε (ε the schedule's effective
learning rate) because averaging N models, each moved by lr on its own data, moves the
average like one SGD with lr/N over all N jobs' data. Block momentum amplifies a steady
block displacement d = a − s: Δ → η_b · d / (1 − bm), i.e. η_b / (1 − bm) times what
averaging alone would do (N times with the defaults). To keep ε the effective rate we
give each job

    lr_bmuf = N · ε · (1 − bm) / η_b    (= ε with the defaults; Kaldi's N · ε at bm = 0, η_b = 1)

i.e. Kaldi's per-job rate times :func:`job_learning_rate_scale`. Scaling by N as for plain
averaging and then applying bm = 1 − 1/N would make the steady step N times too large.
(Jobs keep no SGD momentum and start natural-gradient statistics afresh, so CNTK's
"reset SGD momentum after aggregation" holds by construction.)

State. The rule writes the start model ``<t>.pt`` and, beside it, the block state as two
plain model files: ``bmuf/<t>.pt`` = the global model g (what diagnostics, the EMA and the
final combination read: for Nesterov it differs from the start model) and
``bmuf/<t>.delta.pt`` = Δ. Arithmetic is in float64; the files are float32 like every
model (at bm = 0, η_b = 1 this is still bit for bit ``average``: g = a is a float32 value).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.model_file import load_model_file, new_model
from paravg.provenance import record_of
from paravg.sync.average import average_jobs
from paravg.sync.bmuf_params import BmufParams
from paravg.sync.tensors import cast_like, file_header, to_float64, weighted_sum, zeros_like

log = logging.getLogger(__name__)


def bmuf_update(
    global_sd: dict,
    delta_sd: dict,
    averaged_sd: dict,
    start_sd: dict,
    params: BmufParams,
    learnable: set[str] | None = None,
) -> tuple[dict, dict]:
    """One block, float64 out; ``start_sd`` = s, the model the block's jobs started from.

    textbook: Δ' = bm · Δ + η_b · (a − s), g' = g + Δ' on every floating tensor.
    cntk: Δ' = bm · Δ + (1 − bm) · η_b · N · (a − s), g' = s + Δ' on the tensors named in
    ``learnable`` (``None``: all); the others g' = a, Δ' = 0.
    """
    bm, lr = params.block_momentum, params.block_lr
    if params.form == "textbook":
        delta = weighted_sum([delta_sd, averaged_sd, start_sd], [bm, lr, -lr], dtype=torch.float64)
        new_global = weighted_sum([global_sd, delta], [1.0, 1.0], dtype=torch.float64)
        return new_global, delta
    gain = (1.0 - bm) * lr * params.num_jobs
    delta = weighted_sum([delta_sd, averaged_sd, start_sd], [bm, gain, -gain], dtype=torch.float64)
    new_global = weighted_sum([start_sd, delta], [1.0, 1.0], dtype=torch.float64)
    for name, v in averaged_sd.items():
        if v.is_floating_point() and learnable is not None and name not in learnable:
            new_global[name] = v.to(torch.float64).clone()
            delta[name] = torch.zeros_like(v, dtype=torch.float64)
    return new_global, delta


def warmup_update(averaged_sd: dict) -> tuple[dict, dict]:
    """A warm-up block: plain averaging, g' = a and Δ' = 0 (float64 out)."""
    return to_float64(averaged_sd), zeros_like(averaged_sd)


def bmuf_start(global_sd: dict, delta_sd: dict, params: BmufParams) -> dict:
    """The model the next iteration's jobs start from: g + bm · Δ (Nesterov) or g."""
    if not params.nesterov:
        return {k: v.clone() for k, v in global_sd.items()}
    return weighted_sum([global_sd, delta_sd], [1.0, params.block_momentum], dtype=torch.float64)


def bmuf_block(
    global_sd: dict,
    delta_sd: dict,
    averaged_sd: dict,
    start_sd: dict,
    params: BmufParams,
    iteration: int,
    learnable: set[str] | None = None,
) -> tuple[dict, dict, dict]:
    """The block over ``iteration``'s jobs: (g', Δ', next start), float64. A warm-up block
    (:meth:`BmufParams.in_warmup`) is plain averaging (g' = s' = a, Δ' = 0); otherwise
    :func:`bmuf_update` then :func:`bmuf_start`."""
    if params.in_warmup(iteration):
        new_g, new_delta = warmup_update(averaged_sd)
    else:
        new_g, new_delta = bmuf_update(
            global_sd, delta_sd, averaged_sd, start_sd, params, learnable
        )
    return new_g, new_delta, bmuf_start(new_g, new_delta, params)


def read_bmuf_state(global_in: str | Path, delta_in: str | Path | None) -> tuple[dict, dict]:
    """(g, Δ) in float64 from ``bmuf/<t>.pt`` + ``.delta.pt``; (``0.pt``, 0) before block 1."""
    g = to_float64(load_model_file(global_in)["state_dict"])
    if delta_in is None:
        return g, zeros_like(g)
    return g, to_float64(load_model_file(delta_in)["state_dict"])


def _learnable(file_dict: dict) -> set[str]:
    """The names of the model's learnable parameters (not its buffers), from its header."""
    f = file_dict
    model = new_model(f["model"], f["feat_dim"], f["ivector_dim"], f["num_targets"])
    return {name for name, _ in model.named_parameters()}


def _norm(sd: dict) -> float:
    return float(
        sum((v.to(torch.float64) ** 2).sum() for v in sd.values() if v.is_floating_point()) ** 0.5
    )


def bmuf_step(
    model_paths: Sequence[str | Path],
    stats_paths: Sequence[str | Path],
    global_in: str | Path,
    delta_in: str | Path | None,
    start_in: str | Path,
    iteration: int,
    threshold: float,
    params: BmufParams,
) -> tuple[dict[str, dict], dict]:
    """One block over ``iteration``'s jobs: the file dicts ``start`` (s^{t+1}), ``global``
    (g) and ``delta`` (Δ), and a summary.

    Reads g from ``global_in`` (``bmuf/<t>.pt``, or ``0.pt`` for the first block), Δ from
    ``delta_in`` (``bmuf/<t>.delta.pt``; ``None`` = 0 for the first block) and the jobs'
    start model s from ``start_in`` (``<t>.pt``). The same function runs inside every
    train job of iteration t + 1 (its start model) and in the ``bmuf`` node (the files):
    the same inputs give the same bits in both. ``params``: the plan's (block momentum
    resolved for the N of ``iteration``: :meth:`paravg.plan.ExperimentPlan.sync_params`).
    """
    g, delta = read_bmuf_state(global_in, delta_in)  # first: a bad state fails fast
    start_prev = to_float64(load_model_file(start_in)["state_dict"])
    averaged, summary = average_jobs(model_paths, stats_paths, iteration, threshold)
    like = averaged["state_dict"]
    a64 = to_float64(like)
    learnable = _learnable(averaged) if params.form == "cntk" else None
    new_g, new_delta, start = bmuf_block(g, delta, a64, start_prev, params, iteration, learnable)
    header = file_header(averaged)
    meta = {"iteration": iteration + 1, "sync": "bmuf"}
    files = {
        role: {**header, "state_dict": cast_like(sd, like), "meta": {**meta, "role": what}}
        for role, sd, what in (
            ("start", start, "start model"),
            ("global", new_g, "global model g"),
            ("delta", new_delta, "block update delta"),
        )
    }
    summary = {
        **summary,
        "selection": summary.pop("method"),
        "method": "bmuf",
        "block_momentum": params.block_momentum,
        "block_lr": params.block_lr,
        "nesterov": params.nesterov,
        "form": params.form,
        "warmup": params.in_warmup(iteration),
        "block_step_norm": _norm(weighted_sum([a64, start_prev], [1.0, -1.0])),  # ‖a − s‖
        "delta_norm": _norm(new_delta),
    }
    log.info(
        "iteration %d: BMUF bm=%.4f lr=%.3f nesterov=%s |a-s|=%.4g |delta|=%.4g",
        iteration,
        params.block_momentum,
        params.block_lr,
        params.nesterov,
        summary["block_step_norm"],
        summary["delta_norm"],
    )
    return files, summary


def start_model(inputs: dict, iteration: int, sync: dict) -> tuple[dict, dict]:
    """s^t of every job of ``iteration`` ≥ 1, formed inside the job from iteration t − 1's
    jobs and the block state after t − 1 blocks (what the ``bmuf`` node writes)."""
    files, summary = bmuf_step(
        inputs["models"],
        inputs["stats"],
        inputs["global"][0],
        (inputs.get("delta") or [None])[0],
        inputs["start"][0],
        iteration - 1,
        sync["objf_threshold"],
        BmufParams(**sync["bmuf"]),
    )
    return files["start"], summary


def bmuf_node(
    files: dict, sync: dict, iteration: int, outputs: dict, plan: dict | None = None
) -> dict:
    """The ``bmuf`` node: write :func:`bmuf_step`'s start model ``<t+1>.pt``, g, Δ and the
    summary (with ``plan``, the record of the plan its inputs carry; off the critical
    path: the jobs of t + 1 form the same start themselves)."""
    steps, summary = bmuf_step(
        files["models"],
        files["stats"],
        files["global"][0],
        (files["delta"] or [None])[0],
        files["start"][0],
        iteration,
        sync["objf_threshold"],
        BmufParams(**sync["bmuf"]),
    )
    written = {}
    for role, step in (("model", "start"), ("global_model", "global"), ("delta", "delta")):
        written[outputs[role]] = save_torch_atomic(outputs[role], steps[step])
    summary |= record_of("bmuf", written)
    if plan is not None:
        summary["plan"] = plan
    write_json_atomic(outputs["summary"], summary)
    return summary
