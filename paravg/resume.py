"""Where a run resumes: the DAG starts at the newest finished iteration (torch-free).

A Kaldi-scale run has thousands of iterations; if the DAG reached back to ``0.pt`` every
time it is built, every cluster job (which builds its own DAG on the node) and every
resume would re-walk the whole history. Instead, at parse time, each per-iteration rule R
of an experiment gets a **frontier** K_R: the largest index such that R's outputs of
every index ≤ K_R exist (files are written atomically, so an existing file is complete).
R is then only allowed to produce indices > K_R (:func:`indices_above`), so the files of
finished iterations are plain inputs and the DAG holds only what is left to do: its size
no longer grows with the run. Finding K_R costs O(t · N) stats; the main snakemake pays
it once, but a cluster job of one iteration t (thousands per run) takes K_R = t − 1 from
its own inputs instead (:func:`resume_frontiers` with ``below``: O(N)).

What makes skipping the history safe is the **fingerprint chain** of
:mod:`paravg.plan`: every job records f_{t+1} (a hash over everything its model depends
on), and :func:`check_plan` compares the newest recorded one with the current plan. If
the config changed what an earlier iteration computes, the first changed index m is
found by bisection (the chain makes "matches" monotone) and, by ``run.on_plan_change``,

* ``stop`` (default): a :class:`~paravg.errors.ConfigError` names the iteration, what
  changed (old → new) and the two ways on; nothing runs;
* ``retrain``: every frontier drops to m − 1, so Snakemake reruns iteration m − 1 and
  everything after it (their params changed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from paravg.errors import ConfigError
from paravg.io import read_json

#: The key of a ``--target-jobs`` job's rule beside its wildcards (no wildcard is named so).
RULE_KEY = "_rule"


def indices_above(k: int) -> str:
    """A regex matching exactly the decimal integers > ``k`` (no leading zeros).

    Written without ``{m,n}`` quantifiers: Snakemake reads braces in a wildcard
    constraint as the end of the wildcard.
    """
    if k < 0:
        return r"\d+"
    s = str(k)
    alts = ["[1-9]" + r"\d" * len(s) + r"\d*"]  # more digits
    for i, ch in enumerate(s):
        d = int(ch)
        if d < 9:
            alts.append(f"{s[:i]}[{d + 1}-9]" + r"\d" * (len(s) - i - 1))
    return "(?:" + "|".join(alts) + ")"


def contiguous_done(paths_of: Callable[[int], Iterable[str]], first: int, last: int) -> int:
    """The largest k in [first − 1, last] with every ``paths_of(t)`` present for t ≤ k."""
    k = first - 1
    for t in range(first, last + 1):
        if not all(os.path.exists(p) for p in paths_of(t)):
            break
        k = t
    return k


@dataclass(frozen=True)
class Frontiers:
    """K_R of each per-iteration rule of one experiment (indices ≤ K_R are done)."""

    train: int
    node: int
    ema: int
    diag: int
    mix: int = 0  # delay-by-one's mix nodes (their starts run ahead of the jobs); else 0

    def capped(self, k: int) -> Frontiers:
        return Frontiers(
            *(min(v, k) for v in (self.train, self.node, self.ema, self.diag, self.mix))
        )

    @classmethod
    def at(cls, k: int, mix_node: bool) -> Frontiers:
        """Every rule finished up to index ``k`` (``mix_node``: the method has mix nodes)."""
        return cls(train=k, node=k, ema=k, diag=k, mix=k if mix_node else 0)


def scan_frontiers(plan) -> Frontiers:
    """Frontiers from the files on disk (no plan check: see :func:`check_plan`).

    A synced model that is missing (deleted because it was damaged: :mod:`paravg.provenance`)
    while the job models it is made from are gone too (temporary files) can only come
    back by retraining its iteration: the train frontier then stops below it.
    """
    L, e, n = plan.layout, plan.name, plan.num_iters
    node_outputs = plan.sync.node_outputs
    train = contiguous_done(plan.job_outputs, 1, n)
    node = contiguous_done(lambda t: [getattr(L, k)(e, t) for k in node_outputs], 1, n)
    if node < train and not _all_exist(plan.job_models(node + 1)):
        train = node
    return Frontiers(
        train=train,
        node=node,
        ema=contiguous_done(lambda t: [L.ema_model(e, t)], 1, n),
        diag=contiguous_done(lambda t: [L.diag(e, t)], 0, n),
        # the mix nodes write indices 2.. (s^0 is 0.pt); a start whose learner's job is
        # gone cannot be rebuilt, but it is not needed either (the job is done)
        mix=max(contiguous_done(plan.mix_outputs, 2, n), train) if plan.sync.mix_node else 0,
    )


def _all_exist(paths: Iterable[str]) -> bool:
    return all(os.path.exists(p) for p in paths)


def restart_iteration(plan, frontiers: Frontiers) -> int | None:
    """The iteration whose jobs start from the synced model instead of the job models.

    The first jobs after the train frontier K (iteration K) form their start from the
    job models of index K. Those are temporary (``run.keep_job_models: false``) and gone
    when the run is rewound to K (a plan change with ``retrain``, a deleted synced
    model). For ``average`` and ``bmuf`` the synced model ``<K>.pt`` *is* that start
    (the node writes the same bits), so the jobs read it instead; decentralized methods
    have one model per learner and no such copy: a ConfigError says what is missing.
    """
    k = frontiers.train
    if not 1 <= k < plan.num_iters or _all_exist(plan.job_models(k)):
        return None
    if not plan.sync.restartable:
        missing = [p for p in plan.job_models(k) if not os.path.exists(p)]
        raise ConfigError(
            f"experiment {plan.name!r}: iteration {k} must run again, but the models of its "
            f"learners' last iteration are gone ({', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}): with sync.method "
            f"{plan.sync.name!r} each learner has its own model and the run keeps no "
            "other copy of it (run.keep_job_models: false deletes them). Restore those "
            "files, or retrain the experiment from the start (delete "
            f"{plan.layout.exp_dir(plan.name)}); keep run.keep_job_models: true to make "
            "every iteration of a decentralized run rebuildable."
        )
    return k


def recorded_plan(plan, index: int, job: int = 0) -> dict | None:
    """The plan record of job ``job`` at layout ``index`` (``init.json`` for index 0)."""
    path = (
        plan.layout.init_stats(plan.name)
        if index == 0
        else plan.layout.job_stats(plan.name, index, job)
    )
    try:
        return read_json(path).get("plan")
    except (OSError, ValueError):
        return None


def _matches(plan, index: int) -> bool:
    rec = recorded_plan(plan, index)
    return rec is not None and rec.get("fingerprint") == plan.fingerprint(index)


def first_changed_index(plan, newest: int) -> int | None:
    """The smallest layout index ≤ ``newest`` whose recorded fingerprint differs from the
    plan's, or None when index ``newest`` matches (bisection: O(log newest) reads)."""
    if newest < 0 or _matches(plan, newest):
        return None
    lo, hi = -1, newest  # invariant: lo matches (or is −1), hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _matches(plan, mid):
            lo = mid
        else:
            hi = mid
    return hi


def describe_change(plan, index: int) -> str:
    """What differs between the files at ``index`` and the plan, key by key."""
    if index == 0:
        return "the initial model's inputs (model config, egs or srand) changed"
    lines = []
    for j in range(plan.num_jobs(index - 1)):
        rec = recorded_plan(plan, index, j) or {}
        old, new = rec.get("params") or {}, plan.job_params(index - 1, j)
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                lines.append(f"job {j}: {key}: {old.get(key)!r} -> {new.get(key)!r}")
        sync = plan.sync_params(max(index - 2, 0))
        if rec.get("sync") != sync:
            lines.append(f"job {j}: sync settings {rec.get('sync')!r} -> {sync!r}")
    if not lines:
        lines.append("(no job of that iteration has a plan record: made by another version)")
    return "\n".join(f"    {line}" for line in lines[:12]) + (
        f"\n    ... and {len(lines) - 12} more" if len(lines) > 12 else ""
    )


def check_plan(plan, frontiers: Frontiers, on_change: str) -> Frontiers:
    """The frontiers to use: ``frontiers`` if the files match the plan; else stop or
    retrain from the first changed iteration (see the module docstring)."""
    newest = frontiers.train
    changed = first_changed_index(plan, newest)
    if changed is None:
        return frontiers
    if on_change == "retrain":
        return frontiers.capped(changed - 1)
    if changed == 0:
        raise ConfigError(initial_model_of_another_config(plan, newest))
    it = f"iteration {changed - 1}"
    raise ConfigError(
        f"experiment {plan.name!r}: the config changed what {it} computes, but its files "
        f"exist ({plan.layout.exp_dir(plan.name)}, finished up to iteration {newest - 1}; "
        f"recorded in {plan.layout.job_stats(plan.name, max(changed, 1), 0)}):\n"
        f"{describe_change(plan, changed)}\n"
        "Either restore the settings to continue the run, or retrain from there with\n"
        "    --config run='{on_plan_change: retrain}'   (or run.on_plan_change in your config)\n"
        "or give the changed settings a new experiment name (experiments: in the config)."
    )


def initial_model_of_another_config(plan, newest: int) -> str:
    """The message for an initial model (``0.pt`` and its record ``init.json``) whose
    fingerprint is not the config's: made by another config (an edit of the model config,
    srand or egs options, or the files copied from another run)."""
    L, e = plan.layout, plan.name
    trained = (
        f"; iterations 0 to {newest - 1} were trained from it and would be retrained"
        if newest >= 1
        else ""
    )
    return (
        f"experiment {e!r}: the initial model {L.init_model(e)} was made by another config "
        f"than this one (its record {L.init_stats(e)} has another fingerprint: the model "
        f"config, srand or the egs differ){trained}.\n"
        f"Rebuild it with\n    rm {L.init_model(e)} {L.init_stats(e)}\nand the same command "
        "(or --config run='{on_plan_change: retrain}'), restore the settings it was made "
        "with, or give this config a new experiment name (experiments: in the config)."
    )


def init_is_stale(plan) -> bool:
    """True when ``0.pt`` is missing or older than the egs it was estimated from."""
    init, info = plan.layout.init_model(plan.name), plan.layout.egs_info()
    try:
        return os.stat(init).st_mtime < os.stat(info).st_mtime
    except OSError:
        return True


def resume_frontiers(plan, on_change: str = "stop", below: int | None = None) -> Frontiers:
    """The checked frontiers of one experiment (all −1/0 when its initial model is stale).

    ``below``: the layout index just below a job run by name (a cluster job of index
    ``below`` + 1). Its inputs are the files of index ``below``; if that index is finished
    (its jobs' outputs exist: O(N) stats), every frontier is ``below`` and the plan is
    checked there, without scanning the run's history (O(t · N) stats): the job's
    snakemake then starts in the same time at iteration 5 and at iteration 1,000.
    Otherwise (a damaged or rewound run) the history is scanned as for the main
    snakemake. Either way the caller caps the frontiers at ``below``.
    """
    if init_is_stale(plan):
        return Frontiers(train=0, node=0, ema=0, diag=-1)
    if below is not None and (below < 1 or _all_exist(plan.job_outputs(below))):
        return check_plan(plan, Frontiers.at(max(below, -1), plan.sync.mix_node), on_change)
    return check_plan(plan, scan_frontiers(plan), on_change)


def _is_mix_node(rule: str | None) -> bool:
    """The rule is a node kind on the per-job axis (paravg.sync.nodes.NODE_KINDS, whose
    frontier is ``mix``: delay-by-one's mix node)."""
    from paravg.sync.nodes import NODE_KINDS

    return rule in NODE_KINDS and NODE_KINDS[rule].frontier == "mix"


def _indices_below_targets(plans: dict, target_jobs: list[dict]) -> dict[str, int] | None:
    """Experiment -> the smallest index of its jobs named by ``--target-jobs``, minus one
    (minus two for a mix node, which runs while its learner's job of the index below
    trains: it reads the files of index t − 2 and the starts of t − 1); None when some
    named job is of no iteration of a known experiment (``init_model``, ``combine``, the
    stages before training: rare jobs, which scan)."""
    below: dict[str, int] = {}
    for w in target_jobs:
        if w.get("exp") not in plans or not str(w.get("t", "")).isdigit():
            return None
        index = int(w["t"]) - (2 if _is_mix_node(w.get(RULE_KEY)) else 1)
        below[w["exp"]] = min(below.get(w["exp"], index), index)
    return below


def _mix_targets_below(target_jobs: list[dict]) -> dict[str, int]:
    """Experiment -> the index below its mix nodes named by ``--target-jobs``: their
    inputs' starts are finished there (their own mix nodes ran)."""
    below: dict[str, int] = {}
    for w in target_jobs:
        if _is_mix_node(w.get(RULE_KEY)) and str(w.get("t", "")).isdigit():
            below[w["exp"]] = min(below.get(w["exp"], int(w["t"])), int(w["t"])) - 1
    return below


def resume_frontiers_of_run(plans: dict, on_change: str, target_jobs: Iterable[dict] = ()) -> dict:
    """The frontiers of every experiment of a run (each plan's restart iteration:
    :func:`restart_iterations` of them).

    A job run by name (``target_jobs``: the wildcards of ``--target-jobs``, what a cluster
    executor runs on the node) must be producible even if its own outputs appeared (a
    retry): its experiment's frontiers are capped below its index. When every named job is
    one of an iteration (a train job, a sync node, the EMA, diagnostics: the thousands of
    a run), its experiment's frontiers come from the index below it
    (:func:`resume_frontiers` with ``below``) and the other experiments count as finished
    (nothing of theirs is in such a job's DAG): O(N) work whatever the run's length, as
    Kaldi's ``nnet3-train`` reads only its own inputs. A rewound run whose first jobs'
    inputs (temporary job models) are gone starts those jobs from the synced model, the
    same bits (:func:`restart_iterations`).
    """
    target_jobs = list(target_jobs)
    below = _indices_below_targets(plans, target_jobs) if target_jobs else None
    if below is None:
        frontiers = {exp: resume_frontiers(p, on_change) for exp, p in plans.items()}
        for w in target_jobs:
            if w.get("exp") in frontiers and str(w.get("t", "")).isdigit():
                frontiers[w["exp"]] = frontiers[w["exp"]].capped(int(w["t"]) - 1)
    else:
        frontiers = {}
        for exp, p in plans.items():
            if exp in below:
                frontiers[exp] = resume_frontiers(p, on_change, below[exp]).capped(below[exp])
            else:
                frontiers[exp] = Frontiers.at(p.num_iters, p.sync.mix_node)
    for exp, mix in _mix_targets_below(target_jobs).items():
        frontiers[exp] = replace(frontiers[exp], mix=mix)
    return frontiers


def restart_iterations(plans: dict, frontiers: dict) -> dict[str, int | None]:
    """Experiment -> the iteration whose jobs start from the synced model
    (:func:`restart_iteration` at its frontiers; None: none), what the plans are then built
    with (:func:`paravg.plan.experiment_plans`' ``restart_at``)."""
    return {exp: restart_iteration(p, frontiers[exp]) for exp, p in plans.items()}


def target_jobs_from_argv(argv: Sequence[str]) -> list[dict[str, str]]:
    """Wildcards of the jobs named by ``--target-jobs RULE:W=V,W=V …`` on a snakemake
    command line (what an executor runs on a cluster node; Snakemake has not parsed them
    when the Snakefile is read)."""
    specs = []
    for i, arg in enumerate(argv):
        if arg == "--target-jobs":
            for value in argv[i + 1 :]:
                if value.startswith("-"):
                    break
                specs.append(value)
    jobs = []
    for spec in specs:
        rule, _, wildcards = spec.partition(":")
        pairs = (item.split("=", 1) for item in wildcards.split(",") if "=" in item)
        jobs.append({RULE_KEY: rule, **{key: value for key, value in pairs}})
    return jobs


def per_iteration_outputs(kind: str) -> tuple[str, ...]:
    """The outputs of each kind of per-iteration rule, as Layout kinds: those of the node
    kinds whose frontier is ``kind`` (:data:`paravg.sync.nodes.NODE_KINDS`: ``node``, and
    ``mix`` for the per-job mix node), or of the train, EMA and diagnostics rules."""
    from paravg.sync.nodes import NODE_KINDS

    fixed = {
        "train": ("job_model", "job_stats", "job_start"),
        "ema": ("ema_model",),
        "diag": ("diag",),
    }
    if kind in fixed:
        return fixed[kind]
    nodes = [node for node in NODE_KINDS.values() if node.frontier == kind]
    if not nodes:
        raise KeyError(kind)
    return tuple(dict.fromkeys(k for node in nodes for k in node.layout_kinds))


def frontier_regex(layout, frontiers: dict, kind: str) -> str:
    """Wildcard regex of ``t`` for a per-iteration rule of ``kind`` (train, node, ema,
    diag): for each experiment, only indices above its frontier. A lookbehind on the path
    between ``{exp}`` and ``{t}`` ties the index to the experiment of the same path
    (Snakemake matches whole paths)."""
    patterns = [
        getattr(layout, k)("{exp}", "{t}", "{j}")
        if k.startswith("job_")
        else getattr(layout, k)("{exp}", "{t}")
        for k in per_iteration_outputs(kind)
    ]
    betweens = sorted({p.split("{exp}", 1)[1].split("{t}", 1)[0] for p in patterns})
    alts = []
    for exp, f in frontiers.items():
        behind = "|".join(f"(?<=/{re.escape(exp)}{re.escape(b)})" for b in betweens)
        alts.append(f"(?:{behind}){indices_above(getattr(f, kind))}")
    return "(?:" + "|".join(alts) + ")"
