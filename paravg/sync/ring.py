"""Ring topologies and ring mixing for the decentralized methods (our reading of ADPSGD).

Cui et al., *Asynchronous decentralized distributed training of acoustic models*
(arXiv 2110.11199) mix each learner with its ring neighbours instead of averaging all
learners; the paper's update equations were not available, so these are OUR definitions
(DESIGN.md, "Sync strategies"), one mixing round per iteration:

* a **ring** is an ordering ``order`` of the N jobs (``order[p]`` = job at position p);
  the neighbourhood of job j at position p is the *set*
  N_j = {order[p−1], order[p], order[p+1]} (indices mod N), so |N_j| = min(N, 3);
* the **mixing** of the end models w_k is  M(w)_j = (1/|N_j|) Σ_{k∈N_j} w_k.
  Every job belongs to exactly |N_j| neighbourhoods (the same size for all j), so the
  mixing matrix W_jk = [k ∈ N_j]/|N_j| is doubly stochastic and the mixing preserves the
  mean of the models: (1/N) Σ_j M(w)_j = (1/N) Σ_j w_j;
* **fixed ring** (``ring``): order = (0, 1, …, N−1), i.e. N_j = {j−1, j, j+1 mod N};
* **random ring** (``random-ring``): the order of the mixing that builds the start models
  of iteration t is a permutation drawn from a seed of (srand, t): reproducible from the
  configuration, re-drawn every iteration. It uses its own generator (SplitMix64 +
  Fisher–Yates), so the ring does not change with numpy or torch versions.
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
    if sorted(order) != list(range(n)):
        raise ValueError(f"a ring order must be a permutation of 0..{n - 1}, got {list(order)}")
    out: list[tuple[int, ...]] = [()] * n
    for p, job in enumerate(order):
        out[job] = tuple(sorted({order[(p - 1) % n], job, order[(p + 1) % n]}))
    return out


def mixing_matrix(neighbourhoods: Sequence[Sequence[int]]) -> list[list[float]]:
    """W_jk = [k ∈ N_j] / |N_j| (row-stochastic; doubly stochastic on a ring)."""
    n = len(neighbourhoods)
    return [[(1.0 / len(nb)) if k in nb else 0.0 for k in range(n)] for nb in neighbourhoods]


def _check_num_jobs(num_jobs: int) -> None:
    if num_jobs < 1:
        raise ValueError(f"a ring needs at least one job, got {num_jobs}")
