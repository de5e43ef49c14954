"""Delay-by-one decentralized training (our reading of Cui et al., arXiv 2110.11199).

Notation (DESIGN.md, "Sync strategies"): job j of iteration t starts from s_j^t and ends
with w_j^t; M is the fixed-ring mixing of :mod:`paravg.sync.ring`. Delay-by-one applies
the local progress of a job to the mixing of the iteration *before*:

    s_j^{t+1} = M(w^{t−1})_j + (w_j^t − s_j^t)

so job j of iteration t+1 needs only its own job of iteration t (w_j^t and the s_j^t it
started from) and the mixing of the neighbours' models of iteration t−1, which were
finished one iteration earlier: the mixing (communication) overlaps the computation of
iteration t, and a slow neighbour delays job j one iteration later than on a plain ring.

Boundary: every job of iteration 0 starts from the initial model, s_j^0 = w^init, and we
set M(w^{−1}) = w^init, so s_j^1 = w_j^0 (a job's first step is its own).

Summing over j with a mean-preserving M: mean(s^{t+1}) = mean(w^{t−1}) + mean(w^t − s^t),
so the consensus gains every job's progress exactly once.

(Cui et al. describe delay-by-one as computing the gradient on weights one step old; with
a whole job per step this is the same idea: the displacement a job computes from s_j^t is
applied to a mixture that did not wait for iteration t.)
"""

from __future__ import annotations

from paravg.sync.tensors import weighted_sum


def delay_by_one_start(mixed_before: dict, own_end: dict, own_start: dict) -> dict:
    """s_j^{t+1} = M(w^{t−1})_j + (w_j^t − s_j^t), float64 arithmetic, dtype of ``own_end``.

    ``mixed_before`` = M(w^{t−1})_j, ``own_end`` = w_j^t, ``own_start`` = s_j^t.
    """
    return weighted_sum([own_end, mixed_before, own_start], [1.0, 1.0, -1.0])
