"""The plan of a run, once: what every training job reads, computes and writes (torch-free).

The rules (``rules/common.smk``), ``paravg.progress``, the plots and the tests read one
:class:`ExperimentPlan` per experiment instead of recomputing the schedule. For job j of
iteration t (0-based, writing layout index t + 1) it holds

* the Kaldi schedule (:mod:`paravg.schedule`): number of jobs N_t, archive and frame,
  per-job learning rate N_t · ε_t times the sync method's factor (BMUF: (1 − bm)/η_b);
  at a low frame rate (``model.frame_subsampling_factor`` f) the schedule counts the
  ⌈frames_per_eg / f⌉ output frames of an eg and its frame k' is eg frame f·k' (the egs,
  shared with the other experiments, are unchanged); a chain experiment's schedule counts
  f passes of each archive (Kaldi's chain ``num_archives_expanded`` = archives × f) and
  its frame index is the job's ``--frame-shift`` (``JobSpec.frame_shift``);
* the seed from (srand, t, j) (:func:`job_seed`);
* the files it reads (its archive, and the start inputs the sync method names) and
  writes (:mod:`paravg.layout`);
* the synced model after t iterations, the models offered to the final combination,
  the archives the LDA-like transform and the priors are estimated on;
* a **fingerprint chain** f_0, f_1, …: f_0 hashes what the initial model depends on,
  f_{t+1} = H(f_t, params of every job of iteration t, the sync settings). Job j of
  iteration t records f_{t+1} in its statistics, so a run's files say which plan made
  them; :mod:`paravg.resume` compares them with the current plan in O(log T) reads. The
  chain costs O(T · N) to compute; the DAG memoises it on disk
  (:mod:`paravg.fingerprint_memo`), so a cluster job reads it instead.

Only what changes a result enters a job's params (and so the fingerprint): fault
injection and benchmarking knobs (``simulate.straggler``) and execution choices
(``trainer.device``) do not.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property

from paravg.contracts import JobRule, MixRule, NodeRule
from paravg.egs.minibatch import MinibatchRule
from paravg.errors import ConfigError
from paravg.layout import Layout
from paravg.nnet.context import frame_subsampling_factor, model_objective
from paravg.nnet.dropout_schedule import dropout_proportion
from paravg.nnet.families import family_of
from paravg.schedule import Schedule, output_frames_per_eg
from paravg.sync.bmuf_params import fingerprint_section
from paravg.sync.registry import SyncMethod, get_method

#: Kaldi accumulates the LDA statistics (and priors) over at most this many archives.
MAX_LDA_ARCHIVES = 10
#: trainer keys a job takes as they are when the config sets them (no schema default):
#: --trainer.optimization.momentum, shrink-value, shrink-saturation-threshold,
#: proportional-shrink
OPTIONAL_TRAINER_KEYS = (
    "momentum",
    "shrink_value",
    "shrink_saturation_threshold",
    "proportional_shrink",
)


def job_seed(srand: int, iteration: int, job: int) -> int:
    """A 63-bit seed from (srand, iteration, job), stable across runs and machines."""
    return (srand * 1_000_003 + iteration) * 1_000_033 + job & ((1 << 63) - 1)


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(json.dumps(part, sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


@dataclass(frozen=True)
class JobSpec:
    """The contract of one train job: everything it computes with beyond its start model
    (all from the plan: :meth:`ExperimentPlan.job`). Torch-free, so the DAG passes it as a
    rule param (a rerun trigger) and the job rebuilds it as ``JobSpec(**params.job)``."""

    iteration: int
    job: int
    learning_rate: float
    minibatch_size: int | str  # B or a Kaldi rule string ("256,128", "128=64/256=32")
    max_param_change: float
    frame: int
    shuffle_buffer_size: int
    srand: int = 0
    archive: str = ""  # the egs archive's prefix (paravg.layout.Layout.egs_prefix)
    ngsgd: dict = field(default_factory=dict)  # trainer.ngsgd: the affine layers' optimiser
    simulate_seconds: float = 0.0  # > 0: sleep this long instead of training (simulate)
    dropout_proportion: float = 0.0  # p of every dropout component (trainer.dropout_schedule)
    l2_regularize_factor: float = 1.0  # Kaldi's --l2-regularize-factor: 1 / num_jobs
    straggler_factor: float = 1.0  # simulate.straggler: timing only, a resource, not planned
    # chunk training (a recurrent family on chunk egs, train_rnn.py): whole chunks, no
    # frame index (``frame`` unused); minibatch_size is num_chunk_per_minibatch
    chunk_training: bool = False
    # chain training (model.objective chain, train.py's chain branch): whole chunks, the
    # input shifted by this many frames (nnet3-chain-copy-egs --frame-shift; ``frame`` 0)
    frame_shift: int = 0
    deriv_truncate_margin: int | None = None  # None: no derivative truncation
    momentum: float = 0.0  # nnet3-train --momentum (train_rnn.py: 0.5)
    # the start model's shrinkage (paravg.nnet.shrinkage; train_rnn.py's options)
    shrink_value: float = 1.0  # 1: none (train_rnn.py's default is 0.99)
    shrink_saturation_threshold: float = 0.4
    proportional_shrink: float = 0.0

    @property
    def seed(self) -> int:
        """Seed of every random choice of this job, from (srand, iteration, job)."""
        return job_seed(self.srand, self.iteration, self.job)

    def minibatch_rule(self) -> MinibatchRule:
        """The merging rule of this job: Kaldi halves every size on iteration 0 (the model
        changes fastest there)."""
        rule = MinibatchRule.parse(self.minibatch_size)
        return rule.halved() if self.iteration == 0 else rule

    def effective_minibatch(self) -> int | str:
        """The minibatch size this job uses: an integer for an integer config, else the
        (halved on iteration 0) rule string."""
        if isinstance(self.minibatch_size, int):
            return max(1, self.minibatch_size // 2) if self.iteration == 0 else self.minibatch_size
        return self.minibatch_rule().text

    def effective_max_param_change(self) -> float:
        """Kaldi divides max-param-change by √2 on iteration 0."""
        return (
            self.max_param_change / math.sqrt(2) if self.iteration == 0 else self.max_param_change
        )


@dataclass(frozen=True)
class PlannedSchedule:
    """The schedule as the jobs really get it (the sync method's factor included), in plain
    values: what the report, ``paravg.progress`` and the config view draw and print.
    Same accessors as :class:`~paravg.schedule.Schedule` for what they read."""

    num_archives: int
    frames_per_eg: int
    num_archives_to_process: int
    jobs_per_iter: tuple[int, ...]
    learning_rates: tuple[float, ...]  # per-job rate, sync factor included
    effective_lrates: tuple[float, ...]  # Kaldi's effective rate ε_t
    combine: tuple[int, ...]

    @classmethod
    def from_dict(cls, d: dict) -> PlannedSchedule:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    @property
    def num_iters(self) -> int:
        return len(self.jobs_per_iter)

    def num_jobs(self, t: int) -> int:
        return self.jobs_per_iter[t]

    def learning_rate(self, t: int) -> float:
        return self.learning_rates[t]

    def effective_lrate(self, t: int) -> float:
        return self.effective_lrates[t]

    def models_to_combine(self) -> list[int]:
        return list(self.combine)


@dataclass(frozen=True)
class EgsGeometry:
    """What the plan needs of the egs (``info.json`` of the egs checkpoint)."""

    num_archives: int
    frames_per_eg: int
    identity: str = ""  # a digest of info.json: new egs start a new chain
    feat_dim: int = 0  # the model's input and output sizes (its size: run.synced_start_mb)
    ivector_dim: int = 0
    num_targets: int = 0

    @classmethod
    def from_info(cls, info: dict) -> EgsGeometry:
        dims = (info.get("feat_dim", 0), info.get("ivector_dim", 0), info.get("num_targets", 0))
        return cls(info["num_archives"], info["frames_per_eg"], _digest(info), *dims)


class ExperimentPlan:
    """The plan of one experiment (its resolved ``model``/``trainer``/``sync`` config)."""

    def __init__(
        self,
        name: str,
        experiment: dict,
        egs: EgsGeometry,
        layout: Layout,
        combine: dict,
        simulate: dict | None = None,
        block_jobs: int = 600,
        synced_start_mb: float = float("inf"),
        block_edges: int | None = None,
        synced_start_jobs: int | None = None,
        *,
        fingerprint_dir: str | None = None,
        restart_at: int | None = None,
    ) -> None:
        self.name = name
        self.experiment = experiment
        self.trainer = experiment["trainer"]
        self.sync_cfg = experiment["sync"]
        self.egs = egs
        self.layout = layout
        self.combine = combine
        self.simulate = simulate or {}
        self.block_jobs = block_jobs
        self.block_edges = block_edges
        self.synced_start_mb = synced_start_mb
        self.synced_start_jobs = synced_start_jobs
        self.sync: SyncMethod = get_method(self.sync_cfg["method"])
        self.mixing = self.sync.mixing_of(self.sync_cfg)  # None: no ring
        # the iteration whose jobs start from the synced model (paravg.resume.restart_iteration)
        self.restart_at = restart_at
        # where the chain is memoised across processes (paravg.fingerprint_memo); None:
        # nowhere. The DAG passes .snakemake/paravg-plan of the workflow.
        self.fingerprint_dir = fingerprint_dir
        self.frame_subsampling_factor = frame_subsampling_factor(experiment["model"])
        frames = output_frames_per_eg(egs.frames_per_eg, self.frame_subsampling_factor)
        self.family = family_of(experiment["model"])  # paravg.nnet.families
        self.chunk_training = self.family.chunk_egs
        self.chain = model_objective(experiment["model"]) == "chain"
        if self.chunk_training:  # train_rnn.py: an archive is processed once per epoch,
            frames = 1  # no frames_per_eg factor, no frame index (whole chunks)
        elif self.chain:  # chain train.py: num_archives_expanded = archives × f, the
            frames = self.frame_subsampling_factor  # schedule's frame index the shift
        try:
            self.schedule = Schedule.from_config(
                self.trainer, egs.num_archives, frames, combine["max_models_combine"]
            )
        except ConfigError as exc:
            raise ConfigError(f"experiment {name!r}: {exc}") from None
        shrink = self.trainer.get("proportional_shrink", 0.0)
        if shrink and shrink * max(self.learning_rates, default=0.0) >= 0.5:
            raise ConfigError(
                f"experiments.{name}.trainer.proportional_shrink = {shrink} gives a shrink "
                f"value of {1 - shrink * max(self.learning_rates):.3f} at the largest per-job "
                "learning rate; it must stay above 0.5 (train_dnn.py / train_rnn.py)"
            )

    # ------------------------------------------------------------ schedule
    @property
    def num_iters(self) -> int:
        return self.schedule.num_iters

    def num_jobs(self, iteration: int) -> int:
        return self.schedule.num_jobs(iteration)

    @cached_property
    def learning_rates(self) -> tuple[float, ...]:
        """Per-job learning rate of every iteration, with the sync method's factor."""
        return tuple(
            self.schedule.learning_rate(t)
            * self.sync.lr_scale(self.sync_cfg, self.schedule.num_jobs(t))
            for t in range(self.num_iters)
        )

    def planned(self) -> PlannedSchedule:
        s = self.schedule
        return PlannedSchedule(
            num_archives=s.num_archives,
            frames_per_eg=s.frames_per_eg,
            num_archives_to_process=s.num_archives_to_process,
            jobs_per_iter=s.jobs_per_iter,
            learning_rates=self.learning_rates,
            effective_lrates=tuple(s.effective_lrate(t) for t in range(self.num_iters)),
            combine=tuple(self.combine_indices()),
        )

    def job_params(self, iteration: int, job: int) -> dict:
        """What job ``job`` of ``iteration`` computes with: exactly what changes its result."""
        archive, frame = self.schedule.archive_and_frame(iteration, job)
        t = self.trainer
        params = {
            "iteration": iteration,
            "job": job,
            "learning_rate": self.learning_rates[iteration],
            "minibatch_size": t["minibatch_size"],
            "max_param_change": t["max_param_change"],
            "frame": 0 if self.chain else self.frame_subsampling_factor * frame,  # eg frame
            "archive": self.layout.egs_prefix(archive),
            "shuffle_buffer_size": t["shuffle_buffer_size"],
            "srand": t["srand"],
            "ngsgd": t["ngsgd"],
        }
        if self.simulate.get("train_seconds", 0):
            params["simulate_seconds"] = self.simulate["train_seconds"]
        if t.get("dropout_schedule"):
            params["dropout_proportion"] = dropout_proportion(
                t["dropout_schedule"], self.schedule.data_fraction(iteration)
            )
        if self.chain and frame:  # chain train.py: --frame-shift=(archive + k // A) % f
            params["frame_shift"] = frame
        # train_rnn.py (chunk egs): chunks per minibatch, truncation, momentum
        params.update(self.family.job_params(t))
        # keys without a schema default: set only where the config sets them, so a job
        # of a config without them has the params (and fingerprint) it had before
        for key in OPTIONAL_TRAINER_KEYS:
            if key in t:
                params[key] = t[key]
        if self.family.l2_regularize:
            # the families with l2-regularize (the TDNN has none): train_dnn.py passes
            # --l2-regularize-factor=1/num_jobs so that the average keeps the l2 of one job
            params["l2_regularize_factor"] = 1.0 / self.num_jobs(iteration)
        return params

    def job(self, iteration: int, job: int) -> JobSpec:
        """The :class:`JobSpec` of job ``job`` of ``iteration`` (:meth:`job_params`)."""
        return JobSpec(**self.job_params(iteration, job))

    def job_rule(self, iteration: int, job: int) -> JobRule:
        """The train job's rule contract (what changes its result: its params are a rerun
        trigger): its :class:`JobSpec` as a dict (``job``), the files its start is formed
        from, the sync settings it forms the start with, its fingerprint, and the
        fingerprint its inputs and the egs must carry (checked before it trains)."""
        return JobRule(
            job=self.job_params(iteration, job),
            files=self.start_inputs(iteration, job),
            fingerprint=self.fingerprint(iteration + 1),
            egs=self.egs.identity,
            egs_info=self.layout.egs_info(),
            inputs_fingerprint=self.start_inputs_fingerprint(iteration, job),
            sync=self.sync_params(max(iteration - 1, 0)),
            method=self.sync.name,
        )

    def node_rule(self, t: int) -> NodeRule:
        """The sync node of index ``t``'s rule contract: the iteration whose jobs it reads,
        their sync settings (the same the jobs of iteration t use), its input files and the
        fingerprint of index t (its inputs' statistics carry it; its summary records it)."""
        return NodeRule(
            iteration=t - 1,
            sync=self.sync_params(t - 1),
            files=self.node_inputs(t),
            fingerprint=self.fingerprint(t),
        )

    def sync_params(self, iteration: int) -> dict:
        """The sync settings of the block over ``iteration``'s jobs, resolved (BMUF's block
        momentum 1 − 1/N for N of that iteration): what the node of index iteration + 1
        and every job of iteration + 1 compute with, the same numbers in both."""
        settings = {k: v for k, v in self.sync_cfg.items() if k != "ema"}
        return self.sync.resolve_params(settings, self.num_jobs(iteration))

    def job_archive(self, iteration: int, job: int) -> int:
        return self.schedule.archive_and_frame(iteration, job)[0]

    def straggler_factor(self, iteration: int, job: int) -> float:
        """``simulate.straggler``: how much slower this job runs (timing only, not a param)."""
        s = self.simulate.get("straggler") or {}
        hit = s.get("job") == job and s.get("iteration", -1) in (-1, iteration)
        return float(s.get("factor", 1.0)) if hit else 1.0

    # ------------------------------------------------------------ files
    @cached_property
    def model_mb(self) -> float:
        """The model's size in MB (float32 parameters and buffers)."""
        from paravg.nnet.context import model_megabytes

        e = self.egs
        ivector_dim = e.ivector_dim if self.experiment.get("ivector_enabled", True) else 0
        return model_megabytes(self.experiment["model"], e.feat_dim, ivector_dim, e.num_targets)

    def starts_from_synced(self, iteration: int) -> bool:
        """Whether the jobs of ``iteration`` read the node's ``<iteration>.pt`` instead of
        averaging the N job models of the iteration before themselves: for methods whose
        node writes every job's start (average, bmuf), once N × the model size exceeds
        ``run.synced_start_mb`` (2N model reads per iteration instead of N²), or when
        those job models are gone (a rewound run: :attr:`restart_at`)."""
        if iteration < 1 or not self.sync.restartable:
            return False
        if iteration == self.restart_at:
            return True
        n = self.num_jobs(iteration - 1)
        if self.synced_start_jobs is not None and n > self.synced_start_jobs:
            return True
        return n * self.model_mb > self.synced_start_mb

    def start_inputs(self, iteration: int, job: int) -> dict[str, list[str]]:
        """Role -> files job ``job`` of ``iteration`` forms its start model from."""
        refs = self.sync.start_inputs(
            iteration, job, self.schedule.jobs_per_iter, self.trainer["srand"], self.mixing
        )
        if self.starts_from_synced(iteration):
            refs = self.sync.restart_inputs(iteration, self.schedule.jobs_per_iter)
        return {role: [r.path(self.layout, self.name) for r in rs] for role, rs in refs.items()}

    def start_inputs_fingerprint(self, iteration: int, job: int) -> str:
        """The fingerprint the job outputs a start model is mixed from must carry."""
        refs = self.sync.start_inputs(
            iteration, job, self.schedule.jobs_per_iter, self.trainer["srand"], self.mixing
        )
        stats = refs.get("stats") or refs.get("previous")
        return self.fingerprint(stats[0].t if stats else 0)

    def mix_inputs(self, iteration: int, job: int) -> dict[str, list[str]]:
        """Role -> files the mix node of (``iteration``, ``job``) forms s_job^iteration from."""
        refs = self.sync.mix_inputs(
            iteration, job, self.schedule.jobs_per_iter, self.trainer["srand"], self.mixing
        )
        return {role: [r.path(self.layout, self.name) for r in rs] for role, rs in refs.items()}

    def mix_rule(self, iteration: int, job: int) -> MixRule:
        """The mix node's rule contract: its input files, the sync settings the jobs of
        ``iteration`` − 1 ran with, the fingerprint its start stands for (index
        ``iteration``) and the one the neighbours' statistics must carry."""
        refs = self.sync.mix_inputs(
            iteration, job, self.schedule.jobs_per_iter, self.trainer["srand"], self.mixing
        )
        stats = refs.get("stats")
        return MixRule(
            iteration=iteration,
            files=self.mix_inputs(iteration, job),
            sync=self.sync_params(iteration - 1),
            fingerprint=self.fingerprint(iteration),
            inputs_fingerprint=self.fingerprint(stats[0].t if stats else 0),
        )

    def mix_outputs(self, index: int) -> list[str]:
        """The kept outputs of the mix nodes writing layout ``index`` (their records)."""
        if not self.sync.mix_node or index < 2:
            return []
        jobs = range(self.num_jobs(index - 1))
        return [self.layout.job_start_record(self.name, index, j) for j in jobs]

    def node_inputs(self, t: int) -> dict[str, list[str]]:
        """Role -> files the sync node of layout index ``t`` reads (off the critical path)."""
        refs = self.sync.node_inputs(t, self.schedule.jobs_per_iter, self.trainer["srand"])
        return {role: [r.path(self.layout, self.name) for r in rs] for role, rs in refs.items()}

    def node_summary(self, t: int) -> str:
        """The node's JSON of index ``t`` (``sync/<t>.json`` or ``consensus/<t>.json``)."""
        return getattr(self.layout, self.sync.node_summary)(self.name, t)

    def job_outputs(self, index: int) -> list[str]:
        """The kept (non-temporary) outputs of the jobs that write layout index ``index``."""
        n = self.num_jobs(index - 1)
        return [self.layout.job_stats(self.name, index, j) for j in range(n)]

    def job_models(self, index: int) -> list[str]:
        n = self.num_jobs(index - 1)
        return [self.layout.job_model(self.name, index, j) for j in range(n)]

    def synced_model(self, t: int) -> str:
        """The model after ``t`` iterations (diagnostics, EMA, combination read it)."""
        return self.sync.synced_model(self.layout, self.name, t)

    def ema_decay(self, t: int) -> float:
        """The EMA's decay at layout index t ≥ 1 (``ema/<t>.pt``): α per iteration, or
        α^{N(t−1)} per archive processed (the N(t−1) jobs of the iteration behind m_t)."""
        ema = self.sync_cfg["ema"]
        if ema.get("decay_per", "iteration") == "archive":
            return ema["decay"] ** self.num_jobs(t - 1)
        return ema["decay"]

    def combine_indices(self) -> list[int]:
        """Kaldi's ``get_model_combine_iters``: indices of the models offered to combination."""
        return self.schedule.models_to_combine()

    def combine_models(self) -> list[str]:
        return [self.synced_model(t) for t in self.combine_indices()]

    def lda_archives(self) -> list[int]:
        """Archives of the LDA-like transform's statistics and of the priors."""
        return list(range(min(self.egs.num_archives, MAX_LDA_ARCHIVES)))

    # ------------------------------------------------------------ blocks
    @cached_property
    def block_iterations(self) -> int:
        """H: iterations per block of the DAG, at least one: at most ``run.block_jobs``
        training jobs and ``run.block_edges`` start inputs.

        The second bound is what the main snakemake's time grows with: each start input is
        a DAG edge, looked up in its producer's list, and averaging below
        ``run.synced_start_mb`` gives N_t · N_{t−1} models and as many statistics per
        iteration (32,768 at N = 128, against 288 at the demo's 12)."""
        by_jobs = self.block_jobs // max(self.schedule.jobs_per_iter)
        if self.block_edges is None or self.num_iters < 2:
            return max(1, by_jobs)
        return max(1, min(by_jobs, self.block_edges // self.max_start_edges))

    @cached_property
    def max_start_edges(self) -> int:
        """The most start inputs (files, every role) the jobs of one iteration read."""
        per_job: dict[tuple, int] = {}
        jobs_per_iter, srand = self.schedule.jobs_per_iter, self.trainer["srand"]
        most = 0
        for t in range(1, self.num_iters):
            synced = self.starts_from_synced(t)
            key = (jobs_per_iter[t - 1], jobs_per_iter[t], synced, min(t, 2))
            if key not in per_job:  # every job of an iteration reads as many files
                refs = (
                    self.sync.restart_inputs(t, jobs_per_iter)
                    if synced
                    else self.sync.start_inputs(t, 0, jobs_per_iter, srand)
                )
                per_job[key] = sum(len(files) for files in refs.values())
            most = max(most, per_job[key] * jobs_per_iter[t])
        return max(1, most)

    @property
    def num_blocks(self) -> int:
        return -(-self.num_iters // self.block_iterations)

    def block_of(self, index: int) -> int:
        """The block holding layout index ``index`` (1..num_iters; block b = (bH, (b+1)H])."""
        return max(0, min(self.num_blocks - 1, (index - 1) // self.block_iterations))

    def block_end(self, block: int) -> int:
        return min((block + 1) * self.block_iterations, self.num_iters)

    # ------------------------------------------------------------ fingerprints
    def init_fingerprint(self) -> str:
        """f_0: the model config, the egs and the seed the initial model depends on."""
        return _digest(
            "init", self.experiment["model"], self.experiment.get("ivector_enabled", True),
            self.egs.identity, self.trainer["srand"],
        )  # fmt: skip

    def sync_fingerprint_part(self) -> dict:
        """The sync settings that change the start models (not EMA: never a start; BMUF's
        keys of issue 37 as :func:`paravg.sync.bmuf_params.fingerprint_section` says;
        ``mixing`` as :meth:`~paravg.sync.registry.SyncMethod.mixing_fingerprint` says)."""
        part = {k: v for k, v in self.sync_cfg.items() if k not in ("ema", "mixing")}
        if "bmuf" in part:
            part["bmuf"] = fingerprint_section(part["bmuf"], part.get("method") == "bmuf")
        mixing = self.sync.mixing_fingerprint(self.sync_cfg)
        if mixing is not None:
            part["mixing"] = mixing
        return part

    def _chain_link(self, iteration: int, before: str) -> str:
        """f_{iteration+1} = H(f_iteration, the params of every job of ``iteration``, the
        sync settings), from ``before`` = f_iteration: O(N) job params."""
        jobs = [self.job_params(iteration, j) for j in range(self.num_jobs(iteration))]
        return _digest(before, jobs, self.sync_fingerprint_part())

    def _compute_chain(self) -> list[str]:
        chain = [self.init_fingerprint()]
        for t in range(self.num_iters):
            chain.append(self._chain_link(t, chain[-1]))
        return chain

    def _chain_key(self) -> str:
        """Everything the chain is a function of: what the plan is built from, its class
        (a subclass may plan otherwise) and the package's source."""
        from dataclasses import asdict

        from paravg.fingerprint_memo import source_digest

        cls = f"{type(self).__module__}.{type(self).__qualname__}"
        return _digest(
            "chain", cls, self.experiment, asdict(self.egs), asdict(self.layout),
            self.combine, self.simulate, source_digest(),
        )  # fmt: skip

    @cached_property
    def _chain(self) -> tuple[list[str], set[int] | None]:
        """(f_0 … f_T, the links checked so far; None: all, computed here). From the memo
        in :attr:`fingerprint_dir` when there is one with f_0 right, else computed (O(T·N))
        and memoised."""
        from paravg import fingerprint_memo as memo

        if self.fingerprint_dir is not None:
            key = self._chain_key()
            path = memo.memo_path(self.fingerprint_dir, self.name, key)
            chain = memo.read_chain(path, self.num_iters + 1)
            if chain is not None and chain[0] == self.init_fingerprint():
                return chain, set()
        chain = self._compute_chain()
        if self.fingerprint_dir is not None:
            memo.write_chain(self.fingerprint_dir, self.name, key, chain)
        return chain, None

    def fingerprint(self, index: int) -> str:
        """f_index: the plan of everything up to layout index ``index`` (0 = ``0.pt``).

        A memoised link is checked once, the first time it is asked for: f_index must be
        H(f_{index−1}, the jobs of iteration index − 1, sync) (O(N)); if it is not, the
        memo is not this plan's and the chain is recomputed (and memoised again)."""
        chain, checked = self._chain
        if checked is not None and index > 0 and index not in checked:
            if self._chain_link(index - 1, chain[index - 1]) != chain[index]:
                fresh = self._compute_chain()
                if self.fingerprint_dir is not None:
                    from paravg.fingerprint_memo import write_chain

                    write_chain(self.fingerprint_dir, self.name, self._chain_key(), fresh)
                self.__dict__["_chain"] = (fresh, None)
                return fresh[index]
            checked.add(index)
        return chain[index]


def experiment_plans(
    config: dict,
    egs_info: dict,
    experiments: dict[str, dict] | None = None,
    *,
    fingerprint_dir: str | None = None,
    restart_at: dict[str, int | None] | None = None,
) -> dict[str, ExperimentPlan]:
    """Every experiment's plan from a validated config and the egs ``info.json``
    (``experiments``: the resolved experiment configs, when the caller has them), each
    complete when built: ``fingerprint_dir`` memoises the fingerprint chains
    (:mod:`paravg.fingerprint_memo`), ``restart_at`` is experiment -> the iteration whose
    jobs start from the synced model (:func:`paravg.resume.restart_iterations`)."""
    from paravg.config import resolved_experiments

    layout = Layout(config["results"])
    egs = EgsGeometry.from_info(egs_info)
    experiments = experiments or resolved_experiments(config)
    restart_at = restart_at or {}
    return {
        name: ExperimentPlan(
            name,
            experiments[name],
            egs,
            layout,
            config["combine"],
            config.get("simulate"),
            config["run"]["block_jobs"],
            config["run"]["synced_start_mb"],
            config["run"]["block_edges"],
            config["run"]["synced_start_jobs"],
            fingerprint_dir=fingerprint_dir,
            restart_at=restart_at.get(name),
        )
        for name in config["experiments"]
    }
