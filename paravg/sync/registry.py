"""The one registry of sync strategies: what each needs from the DAG (torch-free).

Every method is one module of :mod:`paravg.sync` and one :class:`SyncMethod` entry
here. The entry answers everything the workflow asks of a method; ``rules/common.smk``
and :mod:`paravg.plan` turn the answers into paths (:mod:`paravg.layout`), nothing else:

1. **start inputs** (:meth:`SyncMethod.start_inputs`): the files job j of iteration t
   reads to form its start model s_j^t, by role. The train job forms s_j^t itself
   (the start function named by ``start``), so the only node on the critical path of an
   iteration is the train job: the DAG edges *are* the communication pattern, and a slow
   job delays only the jobs that read it.
2. **node** (``node``, a kind of :data:`paravg.sync.nodes.NODE_KINDS`): the rule that
   writes, once per iteration and off the critical path (no train job waits for it), the
   synced model of the method — ``average`` (``<t>.pt``, the same mean the jobs formed),
   ``bmuf`` (the block state g, Δ that the next-but-one iteration's jobs read), or
   ``consensus`` (mean of all jobs).
3. **synced model** (``synced``): which layout file is "the model after t iterations"
   for diagnostics, the EMA and the final combination.
4. **learning-rate factor** (``lr_scale``): the factor on Kaldi's per-job rate N · ε.
5. **history** (``history``): how many iterations back the start inputs reach (the
   resume frontier must keep that many iterations of job outputs).
6. **mix node** (``mix_inputs``, delay-by-one only): one node per (t, j) that writes the
   learner's start s_j^t (``<t+1>/job<j>.start.pt``) from the neighbours' starts of t − 1
   (written by their mix nodes) and the learner's own job of t − 2, so that it runs while
   the learner's job of t − 1 trains (Cui et al.'s overlap of mixing and computing); the
   train job then reads that file and, for order, its own job of t − 1, and waits for no
   neighbour's job.

Notation: job j of iteration t (0-based) starts from s_j^t and writes w_j^t to the layout
index t + 1 (``<t+1>/job<j>.pt``); iteration 0 starts every job from ``0.pt``.

| method | node | s_j^t for t ≥ 1 |
|---|---|---|
| ``average`` | ``average`` | mean of the accepted w^{t−1} (the best job when t − 1 = 0) |
| ``bmuf`` | ``bmuf`` | g^t + bm·Δ^t (Nesterov) or g^t, from w^{t−1} and the state of t − 1 |
| ``ring`` | ``consensus`` | W^t(s^{t−1})_j + (w_j^{t−1} − s_j^{t−1}) (ADPSGD, fixed ring) |
| ``random-ring`` | ``consensus`` | the same on the ring drawn from (srand, t) |
| ``delay-by-one`` | ``consensus`` | W^t(s^{t−1})_j + (w_j^{t−2} − s_j^{t−2}); s^1 = 0.pt |
| ``gossip-average`` | ``consensus`` | M(w^{t−1})_j (adapt-then-combine: ``ring`` before issue 37) |
| ``random-gossip-average`` | ``consensus`` | the same on the ring drawn from (srand, t) |
| ``d-psgd`` | ``consensus`` | M(s^{t−1})_j + (w_j^{t−1} − s_j^{t−1}) (Kaldi's rule) |

M: the mixing of ``sync.mixing`` (:mod:`paravg.sync.ring`; default pairwise for the
ADPSGD methods, ``neighbourhood`` for the others) with Kaldi's row-stochastic neighbour
rule (:mod:`paravg.sync.decentralized`); W: the same mixing with the symmetric edge rule
(:mod:`paravg.sync.adpsgd`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from paravg.errors import ConfigError
from paravg.sync import ring
from paravg.sync.bmuf_params import BmufParams, job_learning_rate_scale
from paravg.sync.nodes import NODE_KINDS, NodeKind


@dataclass(frozen=True)
class FileRef:
    """One file of an earlier iteration, by layout kind and index (and job)."""

    kind: str  # a Layout method: job_model, job_stats, job_start, init_model, bmuf_global, ...
    t: int | None = None
    job: int | None = None

    def path(self, layout, exp: str) -> str:
        args = [a for a in (self.t, self.job) if a is not None]
        return getattr(layout, self.kind)(exp, *args)


StartInputs = dict[str, list[FileRef]]


def _initial() -> StartInputs:
    return {"initial": [FileRef("init_model")]}


def _jobs(index: int, jobs) -> StartInputs:
    """The models and statistics of the given jobs at layout index ``index``."""
    return {
        "models": [FileRef("job_model", index, k) for k in jobs],
        "stats": [FileRef("job_stats", index, k) for k in jobs],
    }


@dataclass(frozen=True)
class SyncMethod:
    """One sync strategy as the workflow sees it."""

    name: str
    summary: str
    node: str  # rule writing the synced model off the critical path
    synced: str  # Layout kind of the synced model after t ≥ 1 iterations
    start: str  # "module:function" forming s_j^t from the start inputs (torch side)
    history: int  # iterations of job outputs the start inputs reach back
    _inputs: Callable[[int, int, tuple[int, ...], int, str | None], StartInputs]
    _node_inputs: Callable[[int, int, tuple[int, ...], int, str | None], StartInputs]
    lr_scale: Callable[[dict, int], float] = lambda sync_cfg, num_jobs: 1.0
    fixed_num_jobs: bool = False  # the topology needs the same N every iteration
    writes_start: bool = False  # the job keeps s_j^t (<t+1>/job<j>.start.pt): read later
    restartable: bool = False  # the node's <t>.pt is every job's start s^t (restart_inputs)
    # the ring a decentralized method mixes on: (num_jobs, iteration, srand) -> job order
    topology: Callable[[int, int, int], tuple[int, ...]] | None = None
    # its ``sync.mixing`` when the config does not set one (decentralized methods)
    mixing: str | None = None
    # ADPSGD (issue 37): combine-then-adapt with the symmetric edge rule; the resolved
    # mixing always enters the fingerprint (the update changed under the same name)
    adpsgd: bool = False
    # the sync settings as the jobs and the node compute with them (sync_cfg, N) -> dict
    resolve_params: Callable[[dict, int], dict] = lambda sync_cfg, num_jobs: dict(sync_cfg)
    # the inputs of the mix node of (t, j), t ≥ 1, writing s_j^t: methods whose jobs read
    # their start from such a node ("start" role) instead of forming it themselves
    _mix_inputs: Callable[[int, int, tuple[int, ...], int, str | None], StartInputs] | None = None

    def mixing_of(self, sync_cfg: dict) -> str | None:
        """The mixing it runs with: ``sync.mixing``, else its own default; None for the
        methods that do not mix on a ring (they ignore the key)."""
        if not self.decentralized:
            return None
        return sync_cfg.get("mixing") or self.mixing

    def mixing_fingerprint(self, sync_cfg: dict) -> str | None:
        """The mixing as it enters the plan's fingerprint: always for the ADPSGD methods
        (their update changed under the same name in issue 37, so their runs from before
        must not count as done); for the others only off their default, so every run made
        before ``sync.mixing`` existed keeps its fingerprint; None: left out."""
        mixing = self.mixing_of(sync_cfg)
        if mixing is None or (not self.adpsgd and mixing == self.mixing):
            return None
        return mixing

    def start_inputs(
        self,
        iteration: int,
        job: int,
        jobs_per_iter: tuple[int, ...],
        srand: int,
        mixing: str | None = None,
    ) -> StartInputs:
        """The files job ``job`` of ``iteration`` reads to form its start model
        (``mixing``: ``sync.mixing``, None for the method's default)."""
        if iteration < 0 or iteration >= len(jobs_per_iter):
            raise ValueError(f"no iteration {iteration} (0..{len(jobs_per_iter) - 1})")
        if not 0 <= job < jobs_per_iter[iteration]:
            raise ValueError(
                f"iteration {iteration} has {jobs_per_iter[iteration]} jobs; no job {job}"
            )
        if iteration == 0:
            return _initial()
        return self._inputs(iteration, job, jobs_per_iter, srand, mixing or self.mixing)

    @property
    def mix_node(self) -> bool:
        """Whether a mix node per (t, j) writes each job's start (delay-by-one)."""
        return self._mix_inputs is not None

    def mix_inputs(
        self,
        iteration: int,
        job: int,
        jobs_per_iter: tuple[int, ...],
        srand: int,
        mixing: str | None = None,
    ) -> StartInputs:
        """The files the mix node writing s_job^iteration (iteration ≥ 1) reads."""
        if self._mix_inputs is None:
            raise ValueError(f"sync method {self.name!r} has no mix node")
        if not 1 <= iteration < len(jobs_per_iter) or not 0 <= job < jobs_per_iter[iteration]:
            raise ValueError(f"no mix node for job {job} of iteration {iteration}")
        return self._mix_inputs(iteration, job, jobs_per_iter, srand, mixing or self.mixing)

    def restart_inputs(self, iteration: int, jobs_per_iter: tuple[int, ...]) -> StartInputs | None:
        """The start inputs of iteration ≥ 1 from the node's ``<t>.pt`` (the same bits the
        jobs would form): when its jobs' inputs are gone (a rewound run:
        :func:`paravg.resume.restart_iteration`) or N is large. The node's summary records
        the plan its inputs carried, which the job checks (two inputs, not N); None for
        methods without such a copy (one model per learner)."""
        if not self.restartable:
            return None
        return {
            "synced": [FileRef("model", iteration)],
            "summary": [FileRef(self.node_summary, iteration)],
        }

    def synced_model(self, layout, exp: str, t: int) -> str:
        """The model after ``t`` iterations (``0.pt`` for t = 0)."""
        if t == 0:
            return layout.init_model(exp)
        return getattr(layout, self.synced)(exp, t)

    def node_inputs(self, t: int, jobs_per_iter: tuple[int, ...], srand: int) -> StartInputs:
        """The files the node of layout index ``t`` (1..num_iters) reads."""
        if not 1 <= t <= len(jobs_per_iter):
            raise ValueError(f"no sync node {t} (1..{len(jobs_per_iter)})")
        return self._node_inputs(t, 0, jobs_per_iter, srand, None)

    @property
    def node_kind(self) -> NodeKind:
        return NODE_KINDS[self.node]

    @property
    def nodes(self) -> tuple[str, ...]:
        """Every node kind the method runs: its per-index ``node``, and the per-job kinds
        (:data:`paravg.sync.nodes.NODE_KINDS` with ``per_job``) when it has a mix node."""
        per_job = tuple(k.name for k in NODE_KINDS.values() if k.per_job)
        return (self.node, *(per_job if self.mix_node else ()))

    @property
    def node_outputs(self) -> tuple[str, ...]:
        """Layout kinds the node writes per index (the summary JSON last)."""
        return self.node_kind.layout_kinds

    @property
    def node_summary(self) -> str:
        return self.node_outputs[-1]

    @property
    def decentralized(self) -> bool:
        return self.topology is not None


def neighbourhoods(
    method: str, iteration: int, num_jobs: int, srand: int, mixing: str | None = None
) -> list[tuple[int, ...]]:
    """The group G_j (sorted, j included) each job mixes with in the mixing that builds
    the start models of ``iteration`` (ring methods): its pair or its ring neighbourhood
    (``mixing``; None: the method's default)."""
    m = get_method(method)
    if m.topology is None:
        raise ValueError(f"sync method {method!r} has no ring")
    order = m.topology(num_jobs, iteration, srand)
    return ring.mixing_groups(order, mixing or m.mixing, iteration)


def _own_first(j: int, group: tuple[int, ...]) -> list[int]:
    """The group with the learner first (the ADPSGD start function's order)."""
    return [j, *(k for k in group if k != j)]


def _fixed_ring(num_jobs: int, iteration: int, srand: int) -> tuple[int, ...]:
    return ring.fixed_ring_order(num_jobs)


def _average_inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    return _jobs(t, range(jobs_per_iter[t - 1]))


def _bmuf_inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    # the block state after t − 1 blocks (written by the bmuf node while iteration t − 1
    # trained); before the first block g = 0.pt and Δ = 0
    # and the start model s^{t−1} those jobs trained from (<t−1>.pt, written by the same
    # node); before the first block g = s = 0.pt and Δ = 0
    if t == 1:
        state = {"global": [FileRef("init_model")], "delta": [], "start": [FileRef("init_model")]}
    else:
        state = {
            "global": [FileRef("bmuf_global", t - 1)],
            "delta": [FileRef("bmuf_delta", t - 1)],
            "start": [FileRef("model", t - 1)],
        }
    return {**_jobs(t, range(jobs_per_iter[t - 1])), **state}


def _gossip_inputs(method: str):
    # s_j^t = M(w^{t−1})_j: the group's end models (adapt-then-combine)
    def inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
        return _jobs(t, neighbourhoods(method, t, jobs_per_iter[t - 1], srand, mixing)[j])

    return inputs


def _adpsgd_inputs(method: str):
    # s_j^t = W^t(s^{t−1})_j + Δ_j^{t−1}: the group's starts of t − 1, own first, with
    # the statistics of their jobs, and the own job of t − 1
    def inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
        group = _own_first(j, neighbourhoods(method, t, jobs_per_iter[t - 1], srand, mixing)[j])
        return {
            "models": [FileRef("job_start", t, k) for k in group],
            "stats": [FileRef("job_stats", t, k) for k in group],
            **_own_displacement(t, j),
        }

    return inputs


def _mixed_starts(method: str, t: int, j: int, jobs_per_iter, srand, mixing) -> StartInputs:
    """The neighbours' start models s_k^{t−1} (kept by their jobs) and their statistics."""
    nb = neighbourhoods(method, t, jobs_per_iter[t - 1], srand, mixing)[j]
    return {
        "models": [FileRef("job_start", t, k) for k in nb],
        "stats": [FileRef("job_stats", t, k) for k in nb],
    }


def _own_displacement(index: int, j: int) -> StartInputs:
    """w_j and s_j of the own job that wrote layout ``index``."""
    return {
        "own_end": [FileRef("job_model", index, j)],
        "own_start": [FileRef("job_start", index, j)],
    }


def _start_ref(t: int, k: int) -> FileRef:
    """s_k^t: ``0.pt`` for t = 0, else the file its mix node wrote (``<t+1>/job<k>.start.pt``)."""
    return FileRef("init_model") if t == 0 else FileRef("job_start", t + 1, k)


def _delay_by_one_inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    # the start its mix node wrote, and (only for order: a learner's jobs run one after
    # another, and the statistics carry the plan's fingerprint) its own job of t − 1
    return {"mixed_start": [_start_ref(t, j)], "previous": [FileRef("job_stats", t, j)]}


def _delay_by_one_mix_inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    """s_j^t = W^t(s^{t−1})_j + Δ_j^{t−2} (Δ^{−1} = 0: s_j^1 = W(s^0)_j = 0.pt).

    The group's starts s_k^{t−1} (own first) come from their mix nodes, which need no
    job of t − 1: so neither does this node. Which edges stand is decided by the
    objectives of the jobs whose displacement each s_k^{t−1} holds (job (t − 3, k), index
    t − 2): the newest ones known without waiting for a neighbour. Before t = 3 every
    s_k^{t−1} is ``0.pt``: no objective is needed.
    """
    nb = _own_first(j, neighbourhoods("delay-by-one", t, jobs_per_iter[t - 1], srand, mixing)[j])
    inputs = {"models": [_start_ref(t - 1, k) for k in nb]}
    if t >= 3:
        inputs["stats"] = [FileRef("job_stats", t - 2, k) for k in nb]
    if t >= 2:
        inputs["own_end"] = [FileRef("job_model", t - 1, j)]
        inputs["own_start"] = [_start_ref(t - 2, j)]
    return inputs


def _d_psgd_inputs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    # s_j^t = M(s^{t−1})_j + Δ_j^{t−1}
    return {
        **_mixed_starts("d-psgd", t, j, jobs_per_iter, srand, mixing),
        **_own_displacement(t, j),
    }


def _all_jobs(t, j, jobs_per_iter, srand, mixing) -> StartInputs:
    return _jobs(t, range(jobs_per_iter[t - 1]))


def _bmuf_lr_scale(sync_cfg: dict, num_jobs: int) -> float:
    return job_learning_rate_scale(BmufParams.from_config(sync_cfg["bmuf"], num_jobs))


def _bmuf_params(sync_cfg: dict, num_jobs: int) -> dict:
    """``sync.bmuf`` resolved for N jobs (block momentum 1 − 1/N when null)."""
    return {**sync_cfg, "bmuf": asdict(BmufParams.from_config(sync_cfg["bmuf"], num_jobs))}


SYNC_METHODS: dict[str, SyncMethod] = {
    m.name: m
    for m in (
        SyncMethod(
            "average", "Kaldi model averaging", "average", "model",
            "paravg.sync.average:start_model", 1, _average_inputs, _all_jobs,
            restartable=True,
        ),
        SyncMethod(
            "bmuf", "block momentum over the average", "bmuf", "bmuf_global",
            "paravg.sync.bmuf:start_model", 1, _bmuf_inputs, _bmuf_inputs, lr_scale=_bmuf_lr_scale,
            restartable=True, resolve_params=_bmuf_params,
        ),
        SyncMethod(
            "ring", "ADPSGD: mix starts on the fixed ring, add own progress", "consensus",
            "consensus_model", "paravg.sync.adpsgd:start_model", 1, _adpsgd_inputs("ring"),
            _all_jobs, fixed_num_jobs=True, writes_start=True, topology=_fixed_ring,
            mixing="pairwise", adpsgd=True,
        ),
        SyncMethod(
            "random-ring", "ADPSGD: mix starts on a ring re-drawn per iteration, add own "
            "progress", "consensus", "consensus_model", "paravg.sync.adpsgd:start_model", 1,
            _adpsgd_inputs("random-ring"), _all_jobs, fixed_num_jobs=True, writes_start=True,
            topology=ring.random_ring_order, mixing="pairwise", adpsgd=True,
        ),
        SyncMethod(
            "delay-by-one", "ADPSGD one step stale: mix starts, add last progress",
            "consensus", "consensus_model", "paravg.sync.adpsgd:start_model", 2,
            _delay_by_one_inputs, _all_jobs, fixed_num_jobs=True, topology=_fixed_ring,
            _mix_inputs=_delay_by_one_mix_inputs, mixing="pairwise", adpsgd=True,
        ),
        SyncMethod(
            "gossip-average", "local SGD with gossip averaging: mix the end models on the "
            "fixed ring", "consensus", "consensus_model", "paravg.sync.decentralized:start_model",
            1, _gossip_inputs("gossip-average"), _all_jobs, fixed_num_jobs=True,
            topology=_fixed_ring, mixing="neighbourhood",
        ),
        SyncMethod(
            "random-gossip-average", "local SGD with gossip averaging on a ring re-drawn per "
            "iteration", "consensus", "consensus_model", "paravg.sync.decentralized:start_model",
            1, _gossip_inputs("random-gossip-average"), _all_jobs, fixed_num_jobs=True,
            topology=ring.random_ring_order, mixing="neighbourhood",
        ),
        SyncMethod(
            "d-psgd", "mix starts, add own progress (Kaldi's neighbour rule)", "consensus",
            "consensus_model", "paravg.sync.decentralized:start_model", 1, _d_psgd_inputs,
            _all_jobs, fixed_num_jobs=True, writes_start=True, topology=_fixed_ring,
            mixing="neighbourhood",
        ),
    )
}  # fmt: skip


def get_method(name: str) -> SyncMethod:
    """The registered method ``name``; a ConfigError listing the known ones otherwise."""
    try:
        return SYNC_METHODS[name]
    except KeyError:
        raise ConfigError(f"unknown sync.method {name!r}; known: {sorted(SYNC_METHODS)}") from None


def methods_with(**properties) -> list[str]:
    """Names of the methods whose attributes equal ``properties`` (e.g. node="bmuf")."""
    return [
        name
        for name, m in SYNC_METHODS.items()
        if all(getattr(m, k) == v for k, v in properties.items())
    ]
