"""The numbers each figure shows, extracted from an :class:`ExperimentRun` (no drawing).

Kept apart from the drawing so that tests can check every plotted value against the
per-iteration JSON. Missing values are ``nan`` (matplotlib leaves a gap), never invented.

x axes: ``model`` t is the model ``<t>.pt`` (after t iterations; ``diag/<t>.json``);
``iteration`` t is the iteration whose jobs start from ``<t>.pt`` (``<t+1>/job<j>.json``,
``sync/<t+1>.json``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from paravg.plan import PlannedSchedule
from paravg.plots.runs import ExperimentRun

NAN = math.nan


def _num(value) -> float:
    """A finite float, or nan for None / non-numbers / non-finite values."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return NAN
    value = float(value)
    return value if math.isfinite(value) else NAN


# ----------------------------------------------------------------- diagnostics
@dataclass
class DiagnosticCurves:
    """``nnet3-compute-prob`` per model: log-prob (nats/frame) and frame accuracy."""

    model: list[int] = field(default_factory=list)
    train_logprob: list[float] = field(default_factory=list)
    valid_logprob: list[float] = field(default_factory=list)
    train_accuracy: list[float] = field(default_factory=list)
    valid_accuracy: list[float] = field(default_factory=list)


def diagnostic_curves(run: ExperimentRun) -> DiagnosticCurves:
    """Train/valid log-prob and accuracy of every model with a ``diag/<t>.json``."""
    out = DiagnosticCurves()
    for t in sorted(run.diags):
        d = run.diags[t]
        train, valid = d.get("train") or {}, d.get("valid") or {}
        out.model.append(t)
        out.train_logprob.append(_num(train.get("logprob")))
        out.valid_logprob.append(_num(valid.get("logprob")))
        out.train_accuracy.append(_num(train.get("accuracy")))
        out.valid_accuracy.append(_num(valid.get("accuracy")))
    return out


# ----------------------------------------------------------------- job objectives
ACCEPTED, REJECTED, UNUSABLE, PENDING = "accepted", "rejected", "unusable", "pending"
NOT_CHOSEN = "not chosen"


@dataclass
class JobPoint:
    """One job's average training objective and what the sync did with it.

    status: ``accepted`` / ``rejected`` by the sync, ``not chosen`` (a usable job of an
    iteration whose sync keeps only the best job, Kaldi's iteration 0: ``method: best``),
    ``unusable`` (no finite objective: diverged or unreadable), or ``pending`` (the sync of
    that iteration has not run yet).
    """

    iteration: int
    job: int
    objf: float
    status: str


def job_points(run: ExperimentRun) -> list[JobPoint]:
    """Every job seen, in (iteration, job) order; objectives from ``job<j>.json``.

    When the job file is missing but the sync recorded the job, the sync's objective is
    used (a sync that used the job had its objective).
    """
    points = []
    for t in run.iterations:
        jobs = run.jobs.get(t, {})
        sync = run.syncs.get(t)
        sync_objfs = sync.get("objfs") if sync and isinstance(sync.get("objfs"), list) else []
        accepted = set(sync.get("accepted") or []) if sync else set()
        rejected = set(sync.get("rejected") or []) if sync else set()
        indices = sorted(set(jobs) | set(range(len(sync_objfs))))
        for j in indices:
            objf = _num(jobs[j].get("objf")) if j in jobs else NAN
            if math.isnan(objf) and j < len(sync_objfs):
                objf = _num(sync_objfs[j])
            if sync is None:
                status = PENDING
            elif j in accepted and not math.isnan(objf):
                status = ACCEPTED
            elif j in rejected and not math.isnan(objf):
                status = NOT_CHOSEN if sync.get("method") == "best" else REJECTED
            else:
                status = UNUSABLE
            points.append(JobPoint(t, j, objf, status))
    return points


@dataclass
class ObjectiveSpread:
    """Per iteration: the lowest, mean and highest finite job objective."""

    iteration: list[int] = field(default_factory=list)
    lowest: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    highest: list[float] = field(default_factory=list)


def objective_spread(points: list[JobPoint], include_rejected: bool = False) -> ObjectiveSpread:
    """Spread of the jobs' objectives per iteration (accepted and pending jobs by default)."""
    keep = {ACCEPTED, PENDING} | ({REJECTED} if include_rejected else set())
    by_iter: dict[int, list[float]] = {}
    for p in points:
        if p.status in keep and not math.isnan(p.objf):
            by_iter.setdefault(p.iteration, []).append(p.objf)
    out = ObjectiveSpread()
    for t in sorted(by_iter):
        values = by_iter[t]
        out.iteration.append(t)
        out.lowest.append(min(values))
        out.mean.append(sum(values) / len(values))
        out.highest.append(max(values))
    return out


# ----------------------------------------------------------------- schedule
@dataclass
class ScheduleSeries:
    """Learning rate and job count per iteration, as run and (optionally) as planned.

    ``lr`` is the per-job learning rate the jobs recorded (mean over the jobs seen;
    they are equal under one schedule). ``effective_lr`` is that rate as the effective
    rate ε the schedule is defined by, for every sync method: lr times the plan's
    ε_t / (per-job rate)_t (:func:`job_to_effective_lr`; average: 1/N, BMUF:
    η_b / (N · (1 − bm))); nan without a plan, which alone knows the method's factor.
    ``num_jobs`` counts only iterations whose sync finished (a running iteration's count is
    not final). ``planned_*`` cover every iteration of the schedule, when one is given.
    """

    iteration: list[int] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    effective_lr: list[float] = field(default_factory=list)
    num_jobs: list[float] = field(default_factory=list)
    planned_iteration: list[int] = field(default_factory=list)
    planned_lr: list[float] = field(default_factory=list)
    planned_effective_lr: list[float] = field(default_factory=list)
    planned_num_jobs: list[int] = field(default_factory=list)


def job_to_effective_lr(schedule: PlannedSchedule | None, t: int) -> float:
    """What turns iteration t's per-job rate into the effective rate ε_t: the plan's
    ε_t / (per-job rate)_t, i.e. 1 / (N_t · the sync method's ``lr_scale``), read off the
    planned numbers rather than worked out again. nan without a plan or past its end."""
    if schedule is None or not 0 <= t < schedule.num_iters:
        return NAN
    per_job = schedule.learning_rate(t)
    return schedule.effective_lrate(t) / per_job if per_job > 0 else NAN


def schedule_series(run: ExperimentRun, schedule: PlannedSchedule | None = None) -> ScheduleSeries:
    """The recorded per-job and effective rates and job counts, and the plan's."""
    out = ScheduleSeries()
    for t in run.iterations:
        lrs = [_num(job.get("lr")) for job in run.jobs.get(t, {}).values()]
        lrs = [x for x in lrs if not math.isnan(x)]
        lr = sum(lrs) / len(lrs) if lrs else NAN
        n = run.num_jobs(t) if t in run.syncs else NAN
        if isinstance(n, int) and n == 0:
            n = NAN
        out.iteration.append(t)
        out.lr.append(lr)
        out.num_jobs.append(n)
        out.effective_lr.append(lr * job_to_effective_lr(schedule, t))
    if schedule is not None:
        for t in range(schedule.num_iters):
            out.planned_iteration.append(t)
            out.planned_lr.append(schedule.learning_rate(t))
            out.planned_effective_lr.append(schedule.effective_lrate(t))
            out.planned_num_jobs.append(schedule.num_jobs(t))
    return out


# ----------------------------------------------------------------- parameter change
def component_order(names) -> list[str]:
    """Components in network order: numbered layers by number, then the rest, output last.

    JSON files store keys sorted alphabetically (``output.affine`` before ``tdnn1.affine``);
    Kaldi names layers ``tdnn1``, ``tdnn2``, …, ``prefinal``, ``output``.
    """

    def key(name: str):
        digits = re.findall(r"\d+", name)
        return (name.startswith("output"), not digits, int(digits[0]) if digits else 0, name)

    return sorted(dict.fromkeys(names), key=key)


@dataclass
class ComponentSeries:
    """One value per model/iteration for each component (components in model order)."""

    x: dict[str, list[int]] = field(default_factory=dict)
    y: dict[str, list[float]] = field(default_factory=dict)

    def add(self, component: str, x: int, y: float) -> None:
        self.x.setdefault(component, []).append(x)
        self.y.setdefault(component, []).append(y)

    @property
    def components(self) -> list[str]:
        """Component names in network order (see :func:`component_order`)."""
        return component_order(self.x)


def parameter_change(run: ExperimentRun, relative: bool = True) -> ComponentSeries:
    """Per component, ‖θ_t − θ_{t−1}‖_F (/ ‖θ_{t−1}‖_F when ``relative``) for each model t.

    From ``diag/<t>.json: progress`` (Kaldi's ``nnet3-show-progress``); model 0 has none.
    """
    key = "relative_change" if relative else "change"
    out = ComponentSeries()
    for t in sorted(run.diags):
        progress = run.diags[t].get("progress") or {}
        for comp, values in progress.items():
            if isinstance(values, dict):
                out.add(comp, t, _num(values.get(key)))
    return out


# ----------------------------------------------------------------- max-change
@dataclass
class MaxChangeRates:
    """Fraction of minibatches where max-change scaled the update, per iteration.

    ``per_component[c]``: mean over the iteration's jobs of the fraction where component
    c's own max-change was active; ``global_``: the same for the whole-model
    max-param-change; ``skipped``: updates skipped (non-finite) summed over jobs.
    """

    per_component: ComponentSeries = field(default_factory=ComponentSeries)
    iteration: list[int] = field(default_factory=list)
    global_: list[float] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)


def max_change_rates(run: ExperimentRun) -> MaxChangeRates:
    out = MaxChangeRates()
    for t in sorted(run.jobs):
        jobs = [run.jobs[t][j] for j in sorted(run.jobs[t])]
        sums: dict[str, list[float]] = {}
        for job in jobs:
            for comp, frac in (job.get("max_change_per_component") or {}).items():
                value = _num(frac)
                if not math.isnan(value):
                    sums.setdefault(comp, []).append(value)
        for comp, values in sums.items():
            out.per_component.add(comp, t, sum(values) / len(values))
        globals_ = [_num(job.get("max_change_global")) for job in jobs]
        globals_ = [g for g in globals_ if not math.isnan(g)]
        out.iteration.append(t)
        out.global_.append(sum(globals_) / len(globals_) if globals_ else NAN)
        out.skipped.append(sum(int(job.get("skipped_updates") or 0) for job in jobs))
    return out


# ----------------------------------------------------------------- whole-run numbers
def archives_processed(run: ExperimentRun) -> dict[int, int]:
    """Model t -> jobs run before it (Σ_{s<t} N_s, archive-passes), over completed syncs.

    Defined for every t up to the first iteration whose sync is missing; the x axis that
    compares experiments with different job counts at equal data seen.
    """
    out = {0: 0}
    total = 0
    t = 0
    while t in run.syncs:
        total += run.num_jobs(t)
        t += 1
        out[t] = total
    return out


@dataclass
class RunSummary:
    """The headline numbers of one experiment (one row of the comparison table)."""

    name: str
    iterations_done: int
    planned_iterations: int | None
    last_model: int | None
    valid_logprob: float
    valid_accuracy: float
    train_logprob: float
    train_accuracy: float
    jobs_run: int
    jobs_rejected: int
    sync_methods: list[str]
    combined_models: int | None
    combine_objective: float
    evals: dict[str, dict]


def run_summary(run: ExperimentRun, schedule: PlannedSchedule | None = None) -> RunSummary:
    """Last diagnostics, job counts, combination and evaluation of one run."""
    last = max(run.diags) if run.diags else None
    d = run.diags.get(last, {}) if last is not None else {}
    train, valid = d.get("train") or {}, d.get("valid") or {}
    rejected = sum(
        len(s.get("rejected") or []) for t, s in run.syncs.items() if t > 0
    )  # iteration 0 keeps the best job by design: not a rejection
    methods = sorted({str(s["method"]) for s in run.syncs.values() if s.get("method")})
    combine = run.combine or {}
    combined = (run.final or {}).get("combined_from", combine.get("num_models"))
    return RunSummary(
        name=run.name,
        iterations_done=len(run.completed_iterations),
        planned_iterations=schedule.num_iters if schedule else None,
        last_model=last,
        valid_logprob=_num(valid.get("logprob")),
        valid_accuracy=_num(valid.get("accuracy")),
        train_logprob=_num(train.get("logprob")),
        train_accuracy=_num(train.get("accuracy")),
        jobs_run=sum(len(jobs) for jobs in run.jobs.values()),
        jobs_rejected=rejected,
        sync_methods=methods,
        combined_models=combined if isinstance(combined, int) else None,
        combine_objective=_num(combine.get("objective")),
        evals=dict(run.evals),
    )
