"""The one registry of sync strategies: what each needs from the DAG.

For every method (``sync.method``) the registry answers the three questions the
Snakefile asks (``rules/common.smk`` turns the answers into paths, nothing else):

1. **fan-in**: is there one global node per iteration on the critical path (the rule
   that writes ``<t>.pt``: ``average`` or ``bmuf``), or none (decentralized)?
2. **edges**: which outputs of earlier iterations does job j of iteration t read to
   form its start model s_j^t? (:class:`StartRecipe`; the DAG edges *are* the
   communication pattern, so a slow job delays only the jobs that read it.)
3. **synced model**: which file is "the model after t iterations" for diagnostics,
   the EMA and the final combination (``<t>.pt``, the BMUF global model ``bmuf/<t>.pt``,
   or the off-critical-path consensus ``consensus/<t>.pt``)?

plus the factor on Kaldi's per-job learning rate N · ε (1 except for BMUF, see
:mod:`paravg.sync.bmuf`). Iterations are numbered as in Kaldi: job j of iteration t
starts from s_j^t and writes w_j^t to ``<t+1>/job<j>.pt``.

| method | fan-in | s_j^t for t ≥ 1 (t = 0: the initial model ``0.pt``) |
|---|---|---|
| ``average`` | ``average`` | ``<t>.pt`` = mean of the accepted w^{t−1} (best job at t − 1 = 0) |
| ``bmuf`` | ``bmuf`` | ``<t>.pt`` = g + bm·Δ (Nesterov) or g |
| ``ring`` | none | mean of w_k^{t−1}, k ∈ {j−1, j, j+1 mod N} |
| ``random-ring`` | none | the same on the ring order drawn from (srand, t) |
| ``delay-by-one`` | none | M(w^{t−2})_j + (w_j^{t−1} − s_j^{t−1}); t = 1: w_j^0 |

Decentralized jobs drop from their mixing the neighbours that are unusable (unreadable,
non-finite) or whose objective is below the best neighbour's by more than
``objf_threshold`` (``average``'s robustness rule, applied locally; normally none). There
is no "best job at iteration 0" rule for them: the ring start is the plain mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# bmuf and ring pull in torch; they are imported where used, so that parsing the
# Snakefile (twice per SLURM job) stays torch-free for the default method.

DECENTRALIZED = ("ring", "random-ring", "delay-by-one")


@dataclass(frozen=True)
class StartRecipe:
    """What the start model s_j^t of one job is computed from.

    * ``synced``: read the global model ``<synced>.pt`` as is (``0`` = the initial model);
    * ``mix_iteration``, ``mix_jobs``: mix the outputs w_k of these jobs of that iteration
      (files ``<mix_iteration+1>/job<k>.pt`` and ``.json``) uniformly after selection;
    * ``own_iteration``: add the own job's progress w_j − s_j of that iteration (files
      ``<own_iteration+1>/job<j>.pt`` and ``job<j>.start.pt``): delay-by-one.
    """

    synced: int | None = None
    mix_iteration: int | None = None
    mix_jobs: tuple[int, ...] = ()
    own_iteration: int | None = None

    def __post_init__(self) -> None:
        if (self.synced is None) == (self.mix_iteration is None):
            raise ValueError("a start recipe reads either a synced model or a mixing")
        if self.mix_iteration is not None and not self.mix_jobs:
            raise ValueError("a mixing needs at least one job")

    def job_outputs(self, job: int) -> list[tuple[int, int]]:
        """(iteration, job) of every job output read by job ``job`` (the DAG's train edges)."""
        out = (
            [(self.mix_iteration, k) for k in self.mix_jobs]
            if self.mix_iteration is not None
            else []
        )
        if self.own_iteration is not None:
            out.append((self.own_iteration, job))
        return out


@dataclass(frozen=True)
class SyncMethod:
    """One sync strategy as the DAG sees it."""

    name: str
    fan_in: str | None  # rule writing <t>.pt once per iteration, or None (decentralized)
    synced_model: str  # "start" (<t>.pt) | "bmuf-global" (bmuf/<t>.pt) | "consensus"
    _start: Callable[[int, int, int, int], StartRecipe]
    summary: str

    @property
    def decentralized(self) -> bool:
        return self.fan_in is None

    def start_recipe(self, iteration: int, job: int, num_jobs: int, srand: int) -> StartRecipe:
        """How job ``job`` of ``iteration`` (with ``num_jobs`` jobs) gets its start model."""
        if not 0 <= job < num_jobs:
            raise ValueError(f"iteration {iteration} has {num_jobs} jobs; no job {job}")
        if iteration < 0:
            raise ValueError(f"no iteration {iteration}")
        if iteration == 0:
            return StartRecipe(synced=0)
        return self._start(iteration, job, num_jobs, srand)

    def learning_rate_scale(self, sync_cfg: dict, num_jobs: int) -> float:
        """Factor on Kaldi's per-job learning rate N · ε for this method."""
        if self.name == "bmuf":
            from paravg.sync import bmuf

            return bmuf.job_learning_rate_scale(
                bmuf.BmufParams.from_config(sync_cfg["bmuf"], num_jobs)
            )
        return 1.0


def neighbourhoods(method: str, iteration: int, num_jobs: int, srand: int) -> list[tuple[int, ...]]:
    """N_j of the mixing that builds the start models of ``iteration`` (ring methods)."""
    from paravg.sync import ring

    if method == "random-ring":
        order = ring.random_ring_order(num_jobs, iteration, srand)
    elif method in ("ring", "delay-by-one"):
        order = ring.fixed_ring_order(num_jobs)
    else:
        raise ValueError(f"sync method {method!r} has no ring")
    return ring.ring_neighbourhoods(order)


def _global(t: int, j: int, n: int, srand: int) -> StartRecipe:
    return StartRecipe(synced=t)


def _ring(t: int, j: int, n: int, srand: int) -> StartRecipe:
    return StartRecipe(mix_iteration=t - 1, mix_jobs=neighbourhoods("ring", t, n, srand)[j])


def _random_ring(t: int, j: int, n: int, srand: int) -> StartRecipe:
    return StartRecipe(mix_iteration=t - 1, mix_jobs=neighbourhoods("random-ring", t, n, srand)[j])


def _delay_by_one(t: int, j: int, n: int, srand: int) -> StartRecipe:
    if t == 1:  # M(w^{-1}) = s^0 = the initial model, so s_j^1 = w_j^0
        return StartRecipe(mix_iteration=0, mix_jobs=(j,))
    return StartRecipe(
        mix_iteration=t - 2,
        mix_jobs=neighbourhoods("delay-by-one", t - 1, n, srand)[j],
        own_iteration=t - 1,
    )


SYNC_METHODS: dict[str, SyncMethod] = {
    m.name: m
    for m in (
        SyncMethod("average", "average", "start", _global, "Kaldi model averaging"),
        SyncMethod("bmuf", "bmuf", "bmuf-global", _global, "block momentum over the average"),
        SyncMethod("ring", None, "consensus", _ring, "mix with fixed ring neighbours"),
        SyncMethod(
            "random-ring", None, "consensus", _random_ring, "mix on a ring re-drawn per iteration"
        ),
        SyncMethod("delay-by-one", None, "consensus", _delay_by_one, "own progress on last mixing"),
    )
}


def get_method(name: str) -> SyncMethod:
    """The registered method ``name``; a ValueError listing the known ones otherwise."""
    try:
        return SYNC_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown sync.method {name!r}; known: {sorted(SYNC_METHODS)}") from None
