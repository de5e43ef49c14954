"""One training job: ``nnet3-train`` on one archive and one frame index.

Mirrors ``steps/libs/nnet3/train/frame_level_objf/common.py: train_new_models`` and
``src/nnet3/nnet-training.cc`` / ``nnet-utils.cc: UpdateNnetWithMaxChange``:

* read the job's archive keeping only output frame k of every eg, buffer-shuffle with a
  seed from (srand, iteration, job), merge into minibatches of B (B/2 at iteration 0),
  dropping the final partial minibatch, or by Kaldi's rule string
  (:mod:`paravg.egs.minibatch`: ``"256,128"`` keeps a final 128..255 as one of 128);
* per minibatch, F = Σ w log p(label) (summed, never averaged); every updatable component
  c proposes a step Δ_c (lr included; natural-gradient preconditioned for NG layers);
* per-component max-change: s_c = min(1, max_change_c / ‖Δ_c‖) (Frobenius over weights
  and bias together), then the global max-param-change on the clipped total
  ‖(s_c Δ_c)_c‖: g = min(1, max_param_change / total) (max_param_change / √2 at iteration 0);
* before max-change, a component with ``l2-regularize`` λ_c adds the plain-gradient term
  Δ_c += −2 · S · lr · λ_c · θ_c, S = egs in the minibatch × ``l2_regularize_factor``
  (1 / num_jobs) (``ApplyL2Regularization``, ``nnet-utils.cc``);
* a non-finite total skips the update (Kaldi only catches ∞; NaN is skipped here too);
* θ_c += g s_c Δ_c; then every batch-norm's statistics × 0.8 (``ScaleBatchnormStats``)
  and, each with probability 1/4, the semi-orthogonal constraint on the constrained
  components (``ConstrainOrthonormal``; :mod:`paravg.nnet.orthonormal`), as
  ``NnetTrainer::TrainInternal`` orders them;
* the dropout proportion of the whole job is the plan's (``trainer.dropout_schedule``).

Chunk training (a recurrent family on chunk egs; ``steps/nnet3/train_rnn.py`` →
``nnet3-train``): no ``--frame``: minibatches of whole chunks of one structure
(:func:`paravg.egs.loader.chunk_minibatches`; ``num_chunk_per_minibatch``, halved at
iteration 0), F = Σ_chunks Σ_{t=0}^{w−1} w_t log p(label_t) over every frame of every
chunk (the extra left / right context frames only feed the recurrence), with the
derivative window of ``--trainer.deriv-truncate-margin`` m (train_rnn.py)::

    min_deriv_time = −(m + model_left)      max_deriv_time = w − 1 + m + model_right

(times relative to the chunk's first frame; derivatives outside are zero; m None: no
truncation), and momentum μ (train_rnn.py's 0.5; ``NnetTrainer::TrainInternal``): the
step D ← μ D + Δ is accumulated over minibatches, max-change is applied to (1 − μ) D
(``UpdateNnetWithMaxChange(delta, max_param_change, 1, 1 − μ)``) and the parameters get
that; D keeps its unclipped value for the next minibatch. μ = 0 is the frame job's
update exactly.

Before training, the start model may be shrunk (every parameter × s; train_rnn.py's
``--trainer.optimization.shrink-value`` and ``proportional-shrink``, applied by Kaldi
with ``nnet3-am-copy --scale``; :mod:`paravg.nnet.shrinkage`).

The job writes ``<t+1>/job<j>.pt`` and a JSON of its statistics beside it; natural-
gradient state is never saved (every job starts it afresh, as Kaldi).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from paravg.contracts import JobRule
from paravg.egs import EgsArchive, chunk_minibatches, frame_minibatches
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.nnet.acoustic import AcousticModel
from paravg.nnet.model_file import build_model, model_to_file_dict
from paravg.nnet.objective import ObjectiveStats, chunk_outputs, weighted_logprob
from paravg.nnet.orthonormal import constrain_components
from paravg.plan import JobSpec
from paravg.provenance import check_input_fingerprints, checksums, record_of

log = logging.getLogger(__name__)


@dataclass
class StepStats:
    """Max-change bookkeeping over a job."""

    num_minibatches: int = 0
    skipped: int = 0
    global_limited: int = 0

    def __post_init__(self) -> None:
        self.per_component: list[int] = []


def add_l2_regularization(
    model: AcousticModel, deltas: list[list[torch.Tensor]], lr: float, scale: float
) -> None:
    """Δ_c += −2 · scale · lr · λ_c · θ_c for every component with ``l2_regularize`` λ_c
    (``scale`` = egs in the minibatch × ``l2_regularize_factor``)."""
    for comp, ds in zip(model.components(), deltas, strict=True):
        if comp.l2_regularize:
            rate = lr * learning_rate_factor(comp)
            for param, d in zip(comp.update_params(), ds, strict=True):
                d.add_(param.detach(), alpha=-2.0 * scale * rate * comp.l2_regularize)


def learning_rate_factor(comp) -> float:
    """Kaldi's ``learning-rate-factor`` of a component (1 unless set: a chain model's
    ``output-xent`` has ``0.5 / xent_regularize``, :func:`chain_job`)."""
    return getattr(comp, "learning_rate_factor", 1.0)


def apply_max_change(
    model: AcousticModel,
    deltas: list[list[torch.Tensor]],
    max_param_change: float,
    stats: StepStats,
    scale: float = 1.0,
) -> bool:
    """Scale and add the steps as ``UpdateNnetWithMaxChange``; return False if skipped.
    ``scale`` multiplies every step before the norms (Kaldi's ``scale`` argument: 1 − μ
    with momentum μ)."""
    comps = model.components()
    if scale != 1.0:
        deltas = [[scale * d for d in ds] for ds in deltas]
    if not stats.per_component:
        stats.per_component = [0] * len(comps)
    norms = torch.stack([torch.sqrt(sum((d.double() ** 2).sum() for d in ds)) for ds in deltas])
    scales = []
    for i, (comp, n) in enumerate(zip(comps, norms.tolist(), strict=True)):
        s = 1.0
        if comp.max_change > 0 and n > comp.max_change:
            s = comp.max_change / n
            stats.per_component[i] += 1
        scales.append(s)
    total = math.sqrt(sum((s * n) ** 2 for s, n in zip(scales, norms.tolist(), strict=True)))
    if not math.isfinite(total):
        stats.skipped += 1
        return False
    g = 1.0
    if max_param_change > 0 and total > max_param_change:
        g = max_param_change / total
        stats.global_limited += 1
    with torch.no_grad():
        for comp, s, ds in zip(comps, scales, deltas, strict=True):
            for param, d in zip(comp.update_params(), ds, strict=True):
                param.add_(d, alpha=g * s)
    return True


def deriv_times(spec: JobSpec, model: AcousticModel, mb) -> dict:
    """``min_deriv_time`` / ``max_deriv_time`` of a chunk minibatch (module docstring;
    train_rnn.py's ``--optimization.min-deriv-time`` and ``max-deriv-time-relative``)."""
    m = spec.deriv_truncate_margin
    if m is None:
        return {}
    width = mb.chunk[0]
    return {
        "min_deriv_time": -(m + model.left_context),
        "max_deriv_time": width - 1 + m + model.right_context,
    }


def train_one_job(
    model: AcousticModel, archive: EgsArchive, spec: JobSpec, device: torch.device
) -> dict:
    """Train ``model`` in place on one archive/frame; return the job statistics."""
    started = time.perf_counter()
    model.to(device).train()
    for comp in model.components():
        comp.reset_state()
    model.reset_nonlinearity_stats(spec.seed)
    model.set_dropout_proportion(spec.dropout_proportion)
    batchnorms = model.batchnorms()
    constrained = [c for c in model.components() if c.orthonormal_constraint]
    constraint_rng = np.random.default_rng([spec.seed, 0, 2])
    regularized = any(c.l2_regularize for c in model.components())
    objective = ObjectiveStats()
    steps = StepStats()
    mpc = spec.effective_max_param_change()
    reader = chunk_minibatches if spec.chunk_training else frame_minibatches
    where = {} if spec.chunk_training else {"frame": spec.frame}
    momentum, carried = spec.momentum, None  # D of the module docstring
    chain = chain_job(model, archive, spec, device)  # None: cross-entropy
    batches = (
        chain[0]
        if chain is not None
        else reader(
            archive,
            **where,
            left_context=model.left_context,
            right_context=model.right_context,
            minibatch_size=spec.minibatch_rule(),
            buffer_size=spec.shuffle_buffer_size,
            seed=spec.seed,
        )
    )
    for mb in batches:
        for p in model.parameters():
            p.grad = None
        if chain is not None:  # paravg.chain.train: LF-MMI + xent_regularize · output-xent
            chain[1].objective(model, mb, chain[2]).backward()
            num_egs = len(mb.rows)
        else:
            feats = mb.feats.to(device)
            ivec = (
                mb.ivectors.to(device) if (mb.ivectors is not None and model.ivector_dim) else None
            )
            labels, weights = mb.labels.to(device), mb.weights.to(device)
            if spec.chunk_training:
                logp = chunk_outputs(model, feats, ivec, mb.chunk, **deriv_times(spec, model, mb))
            else:
                logp = model(feats, ivec)[:, 0]
            objf = weighted_logprob(logp, labels, weights)
            (-objf).backward()
            objective.add(logp.detach(), labels, weights)
            num_egs = feats.shape[0]
        deltas = [
            comp.delta(spec.learning_rate * learning_rate_factor(comp))
            for comp in model.components()
        ]
        if regularized:
            scale = num_egs * spec.l2_regularize_factor
            add_l2_regularization(model, deltas, spec.learning_rate, scale)
        if momentum:
            if carried is not None:
                for ds, cs in zip(deltas, carried, strict=True):
                    for d, c in zip(ds, cs, strict=True):
                        d.add_(c)
            apply_max_change(model, deltas, mpc, steps, scale=1.0 - momentum)
            carried = [[momentum * d for d in ds] for ds in deltas]
        else:
            apply_max_change(model, deltas, mpc, steps)
        for bn in batchnorms:
            bn.scale_stats()
        if constrained:
            constrain_components(constrained, constraint_rng)
        steps.num_minibatches += 1
    elapsed = time.perf_counter() - started
    log.info("trained %d minibatches in %.2f s", steps.num_minibatches, elapsed)
    if spec.straggler_factor > 1.0:  # benchmarking aid (simulate.straggler)
        time.sleep((spec.straggler_factor - 1.0) * elapsed)
    n = max(steps.num_minibatches, 1)
    if chain is not None:  # the chain objective per frame is the job's objf
        summary = chain[2].as_dict()
        objf, accuracy, frames = summary["chain_objf"], None, summary["frames"]
        if not frames:
            objf = -100000.0
    else:
        summary = None
        objf = objective.logprob if objective.weight > 0 else -100000.0
        accuracy, frames = objective.accuracy, objective.weight
    out = {
        "iteration": spec.iteration,
        "job": spec.job,
        "objf": objf,
        "accuracy": accuracy,
        "frames": frames,
        "lr": spec.learning_rate,
        "minibatch_size": spec.effective_minibatch(),
        "frame": spec.frame,
        "num_minibatches": steps.num_minibatches,
        "max_change_per_component": dict(
            zip(
                model.component_names(),
                [c / n for c in steps.per_component] or [0.0] * len(model.components()),
                strict=True,
            )
        ),
        "max_change_global": steps.global_limited / n,
        "skipped_updates": steps.skipped,
    }
    if summary is not None:
        out["chain"] = summary
    return out


def chain_job(model: AcousticModel, archive: EgsArchive, spec: JobSpec, device):
    """A chain model's (minibatches, :class:`paravg.chain.train.ChainComputer`,
    :class:`~paravg.chain.train.ChainStats`): egs with supervision, buffer-shuffled as
    the cross-entropy job's, merged into minibatches of the sizes the rule makes of them
    (``nnet3-chain-merge-egs``), the input moved by the job's frame shift
    (``nnet3-chain-copy-egs --frame-shift``); None for a cross-entropy model."""
    if getattr(model, "objective", "xent") != "chain":
        return None
    from paravg.chain.train import ChainComputer, ChainStats
    from paravg.egs.shuffle import buffer_shuffle_order

    computer = ChainComputer(archive, model.model_cfg, model.num_targets, device)
    if computer.opts.xent_regularize > 0:  # run_tdnn_1d: output-xent learns 0.5 / x faster
        model.output_xent.learning_rate_factor = 0.5 / computer.opts.xent_regularize
    order = buffer_shuffle_order(archive.num_egs, spec.shuffle_buffer_size, spec.seed)
    sizes = spec.minibatch_rule().sizes(archive.meta.window, computer.num_supervised)
    batches = computer.minibatches(model, sizes, order, spec.frame_shift)
    return batches, computer, ChainStats()


def simulated_job(model: AcousticModel, spec: JobSpec) -> dict:
    """``simulate.train_seconds``: sleep instead of training, keep the start model.

    For measuring the workflow's own overhead (scheduling, start-up, I/O) at a fixed job
    length without using the CPU; the statistics say ``simulated`` and carry a finite
    objective so that every sync method accepts the job.
    """
    time.sleep(spec.simulate_seconds)
    return {
        "iteration": spec.iteration,
        "job": spec.job,
        "objf": 0.0,
        "accuracy": 0.0,
        "frames": 0.0,
        "lr": spec.learning_rate,
        "minibatch_size": spec.effective_minibatch(),
        "frame": spec.frame,
        "num_minibatches": 0,
        "max_change_per_component": dict.fromkeys(model.component_names(), 0.0),
        "max_change_global": 0.0,
        "skipped_updates": 0,
        "simulated": spec.simulate_seconds,
    }


def shrink_start_model(model: AcousticModel, spec: JobSpec) -> dict | None:
    """Scale the start model's parameters as ``train_rnn.py`` does before a job
    (:mod:`paravg.nnet.shrinkage`); the decision for the job's statistics, or None when
    the job has no shrink option."""
    from paravg.nnet.shrinkage import scale_parameters, shrinkage_value

    if (spec.shrink_value, spec.proportional_shrink) == (1.0, 0.0):
        return None
    value, sat = shrinkage_value(
        spec.iteration,
        spec.learning_rate,
        model,
        spec.shrink_value,
        spec.shrink_saturation_threshold,
        spec.proportional_shrink,
    )
    scale_parameters(model.components(), value)
    if value != 1.0:
        log.info("shrink: %.5f (saturation %s)", value, "n/a" if sat is None else f"{sat:.3f}")
    return {"value": value, "saturation": sat}


def run_train_job(
    start: dict,
    archive_prefix: str | Path,
    model_out: str | Path,
    stats_out: str | Path,
    spec: JobSpec,
    ngsgd: dict,
    device: torch.device,
    record: dict | None = None,
) -> dict:
    """Train from the start model file dict ``start``; write ``model_out`` and
    ``stats_out`` atomically and return the stats. ``record`` (how the start model was
    formed, the rule running it, the job's plan and fingerprint) is stored in the stats as
    is."""
    from paravg.nnet.ng_affine import make_affine_factory

    started_at = time.time()
    torch.manual_seed(spec.seed)
    model = build_model(start, make_affine_factory(ngsgd))
    shrink = shrink_start_model(model, spec)
    if spec.simulate_seconds > 0:
        stats = simulated_job(model, spec)
    else:
        stats = train_one_job(model, EgsArchive(archive_prefix), spec, device)
    if shrink is not None:
        stats["shrink"] = shrink
    stats["archive"] = str(archive_prefix)
    stats.update(record or {})
    # wall-clock times (Unix seconds) of the training part, for timelines and benchmarks
    stats["wall"] = {"started_at": started_at, "finished_at": time.time()}
    model.to("cpu")
    if not math.isfinite(stats["objf"]):
        log.warning("job %d of iteration %d: non-finite objective", spec.job, spec.iteration)
    digest = save_torch_atomic(
        model_out, model_to_file_dict(model, {"iteration": spec.iteration + 1, "job": spec.job})
    )
    stats["sha256"] = {**stats.get("sha256", {}), **checksums({model_out: digest})}
    write_json_atomic(stats_out, stats)
    return stats


def check_egs_identity(info_path: str | Path, expected: str) -> None:
    """The egs on disk must be those the job was planned with (they may have been rebuilt
    after the DAG was built, e.g. when an upstream file changed)."""
    from paravg.errors import TrainingError
    from paravg.io import read_json
    from paravg.plan import EgsGeometry

    got = EgsGeometry.from_info(read_json(info_path)).identity
    if got != expected:
        raise TrainingError(
            f"{info_path}: the egs changed since this job was planned (identity {got}, "
            f"planned {expected}); run snakemake again to plan the training on the new egs"
        )


def run_planned_job(
    rule: JobRule,
    model_out: str | Path,
    stats_out: str | Path,
    start_out: str | Path | None,
    device: torch.device,
    straggler_factor: float = 1.0,
) -> dict:
    """One train job of the DAG: check the inputs' plan, form the start model as the sync
    method says (:mod:`paravg.sync.start`), keep it if the method reads it later, train.

    ``rule`` is the job's :class:`paravg.contracts.JobRule` (its rule params, read back):
    the job's ``job`` (its :class:`JobSpec`), the ``files`` its start is formed from, the
    ``fingerprint`` recorded in its statistics, the ``inputs_fingerprint`` its inputs must
    carry, the ``egs`` identity the ``egs_info`` file must have, the ``sync`` settings and
    ``method``. ``straggler_factor``: ``simulate.straggler``'s slow-down (timing only: a
    resource of the rule, never planned).
    """
    from paravg.sync.start import form_start_model

    inputs = rule.files
    spec = replace(JobSpec(**rule.job), straggler_factor=straggler_factor)
    archive_prefix = spec.archive
    check_egs_identity(rule.egs_info, rule.egs)
    if "initial" not in inputs:  # the jobs' statistics, or the node's summary of them
        stats = [*inputs.get("stats", []), *inputs.get("previous", [])]
        check_input_fingerprints(stats, rule.inputs_fingerprint)
        check_input_fingerprints(inputs.get("summary", []), rule.inputs_fingerprint, True)
    start, how = form_start_model(rule.method, inputs, spec.iteration, rule.sync)
    log.info("job %d of iteration %d starts from %s", spec.job, spec.iteration, how)
    written = {} if start_out is None else {start_out: save_torch_atomic(start_out, start)}
    # the rule running it (rules/train.smk): train_job_keep_start when it keeps its start
    record = record_of("train_job" if start_out is None else "train_job_keep_start", written)
    record |= {
        "start": how,
        "plan": {
            "fingerprint": rule.fingerprint,
            "params": rule.job,
            "sync": rule.sync,
        },
    }
    return run_train_job(
        start, archive_prefix, model_out, stats_out, spec, spec.ngsgd, device, record
    )
