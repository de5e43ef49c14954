"""Ring topologies and ring mixings for the decentralized methods.

Cui et al., *Asynchronous decentralized distributed training of acoustic models*
(arXiv 2110.11199) mix each learner with its ring neighbours instead of averaging all
learners. One mixing round per iteration, on a ring (an ordering of the jobs), in one of
two forms (``sync.mixing``):

* **pairwise** (AD-PSGD, Lian et al. 2018, and the IBM line of work Cui et al. build on):
  the mixing that builds the starts of iteration t is a *matching* of the ring: the
  pairs (order[o + 2i], order[o + 2i + 1]) (indices mod N, i = 0 … ⌊N/2⌋ − 1) at offset
  o = (t − 1) mod N, and every pair averages (½, ½): M(x)_j = ½ (x_j + x_{π(j)}). With N
  odd one learner, order[o − 1], has no partner that iteration and keeps its own model
  (M(x)_j = x_j); the offset moves by one per iteration, so each learner sits out once in
  N iterations. On the fixed ring (order = identity, N even) the matchings alternate
  between {(0,1), (2,3), …} and {(1,2), …, (N−1,0)}: every learner averages with its right
  neighbour, then its left, and so on. This is AD-PSGD's schedule made synchronous: there
  the ring is split into "active" and "passive" learners (a bipartite graph, so that no
  two averagings collide) and each active learner averages with one passive neighbour at a
  time; the product of the two alternating matchings, ½(I+P_even)·½(I+P_odd), connects the
  whole ring, so repeated mixing reaches consensus. The mixing matrix of each iteration is
  symmetric, hence doubly stochastic: it preserves the mean of the models. Its
  eigenvalues are 1 (pair sums) and 0 (pair differences): no negative, "flipping" mode.
* **neighbourhood** (Lian et al. 2017's D-PSGD ring, and paravg's mixing before issue 37):
  the rules below, three-way with weights 1/3.

Neighbourhood mixing:

* a **ring** is an ordering ``order`` of the N jobs (``order[p]`` = job at position p);
  the neighbourhood of job j at position p is the *set*
  N_j = {order[p−1], order[p], order[p+1]} (indices mod N), so |N_j| = min(N, 3);
* the **mixing** of models x_k is  M(x)_j = (1/|N_j|) Σ_{k∈N_j} x_k.
  Every job belongs to exactly |N_j| neighbourhoods (the same size for all j), so the
  mixing matrix W_jk = [k ∈ N_j]/|N_j| is doubly stochastic and the mixing preserves the
  mean of the models: (1/N) Σ_j M(w)_j = (1/N) Σ_j w_j;

The two rings (either mixing):

* **fixed ring** (``ring``, ``gossip-average``, ``delay-by-one``, ``d-psgd``): order =
  (0, 1, …, N−1), i.e. N_j = {j−1, j, j+1 mod N};
* **random ring** (``random-ring``, ``random-gossip-average``): the order of the mixing
  that builds the start models of iteration t is a permutation drawn from a seed of
  (srand, t): reproducible from the configuration, re-drawn every iteration. Pairwise,
  its matching is a uniformly random perfect matching of the jobs (one left out for odd
  N), re-drawn per iteration. It uses its own generator (SplitMix64 + Fisher–Yates), so
  the ring does not change with numpy or torch versions.
"""

from __future__ import annotations

from collections.abc import Sequence

_MASK64 = (1 << 64) - 1
_RING_DOMAIN = 0x52494E47  # "RING": keeps ring seeds apart from job seeds of the same numbers


def _splitmix64(state: int) -> tuple[int, int]:
    """One SplitMix64 step: (new state, 64-bit output)."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return state, z ^ (z >> 31)


def ring_seed(srand: int, iteration: int) -> int:
    """The 64-bit seed of the random ring of ``iteration`` (a function of srand and t only)."""
    state = (_RING_DOMAIN * 1_000_003 + srand) & _MASK64
    state, _ = _splitmix64(state)
    return (state * 1_000_033 + iteration) & _MASK64


def seeded_permutation(n: int, seed: int) -> tuple[int, ...]:
    """A uniformly random permutation of range(n) by Fisher–Yates from SplitMix64(seed)."""
    perm = list(range(n))
    state = seed & _MASK64
    for i in range(n - 1, 0, -1):
        state, r = _splitmix64(state)
        k = r % (i + 1)  # modulo bias < (i+1)/2^64: irrelevant for a handful of jobs
        perm[i], perm[k] = perm[k], perm[i]
    return tuple(perm)


def fixed_ring_order(num_jobs: int) -> tuple[int, ...]:
    """The fixed ring: job j sits at position j."""
    _check_num_jobs(num_jobs)
    return tuple(range(num_jobs))


def random_ring_order(num_jobs: int, iteration: int, srand: int) -> tuple[int, ...]:
    """The ring used to build the start models of ``iteration``, from seed (srand, iteration)."""
    _check_num_jobs(num_jobs)
    return seeded_permutation(num_jobs, ring_seed(srand, iteration))


def ring_neighbourhoods(order: Sequence[int]) -> list[tuple[int, ...]]:
    """N_j for every job j (sorted tuples): j and its two ring neighbours in ``order``."""
    n = len(order)
    _check_order(order)
    out: list[tuple[int, ...]] = [()] * n
    for p, job in enumerate(order):
        out[job] = tuple(sorted({order[(p - 1) % n], job, order[(p + 1) % n]}))
    return out


def pairwise_groups(order: Sequence[int], offset: int) -> list[tuple[int, ...]]:
    """G_j for every job j (sorted tuples): j and its partner in the matching of ``order``
    at ``offset`` (pairs (order[o + 2i], order[o + 2i + 1]) mod N), or (j,) for the one
    learner left out when N is odd (and for N = 1)."""
    n = len(order)
    _check_order(order)
    out: list[tuple[int, ...]] = [(job,) for job in range(n)]
    for i in range(n // 2):
        a, b = order[(offset + 2 * i) % n], order[(offset + 2 * i + 1) % n]
        out[a] = out[b] = tuple(sorted((a, b)))
    return out


#: ``sync.mixing``: the forms of the mixing round (the schema's enum)
MIXINGS = ("pairwise", "neighbourhood")


def mixing_groups(order: Sequence[int], mixing: str, iteration: int) -> list[tuple[int, ...]]:
    """The group each job mixes with (itself included, sorted) in the mixing that builds
    the starts of ``iteration`` ≥ 1: the ring neighbourhood, or the pair of the matching at
    offset (iteration − 1) mod N."""
    if mixing == "neighbourhood":
        return ring_neighbourhoods(order)
    if mixing == "pairwise":
        return pairwise_groups(order, (iteration - 1) % max(len(order), 1))
    raise ValueError(f"unknown mixing {mixing!r}; known: {list(MIXINGS)}")


def mixing_matrix(neighbourhoods: Sequence[Sequence[int]]) -> list[list[float]]:
    """W_jk = [k ∈ N_j] / |N_j| (row-stochastic; doubly stochastic on a ring, and for the
    groups of a matching: ½ in a pair, 1 for a learner left out)."""
    n = len(neighbourhoods)
    return [[(1.0 / len(nb)) if k in nb else 0.0 for k in range(n)] for nb in neighbourhoods]


def _check_order(order: Sequence[int]) -> None:
    n = len(order)
    if sorted(order) != list(range(n)):
        raise ValueError(f"a ring order must be a permutation of 0..{n - 1}, got {list(order)}")


def _check_num_jobs(num_jobs: int) -> None:
    if num_jobs < 1:
        raise ValueError(f"a ring needs at least one job, got {num_jobs}")
