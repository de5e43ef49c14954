"""Delay-by-one (ADPSGD, Cui et al., arXiv 2110.11199) and its undelayed form (D-PSGD):
the update, its stability at Kaldi's job size, and d-psgd's arithmetic.

Notation (DESIGN.md, "Sync strategies"): job j of iteration t starts from s_j^t and ends
with w_j^t; Δ_j^t = w_j^t − s_j^t is its displacement (its local progress); M is the
mixing of the fixed ring (:mod:`paravg.sync.ring`: pairwise, ½ with the partner of the
iteration's matching, the default of delay-by-one and ring since issue 37; or the
neighbourhood, M(x)_j = mean of x_k, k ∈ {j−1, j, j+1}, d-psgd's). Delay-by-one's and
ring's start models are formed by :mod:`paravg.sync.adpsgd` (with its symmetric edge
rule); d-psgd's by :mod:`paravg.sync.decentralized` with :func:`mix_plus_displacement`.

Cui et al. model asynchronous decentralized SGD as W_{k+1} = W_k T_k − α g(W_{k−1}):
every step mixes the *current* weights of the neighbours, and the gradient applied is one
step stale, so that computing it overlaps the communication. With one training job per
step, in our terms:

    delay-by-one:  s_j^{t+1} = M(s^t)_j + Δ_j^{t−1}        (Δ^{−1} = 0: s^1 = M(s^0) = s^0)
    d-psgd:        s_j^{t+1} = M(s^t)_j + Δ_j^t            (Lian et al. 2017, undelayed)

Both mix the neighbours' start models s^t — which exist as soon as iteration t starts — so
the mixing never waits for the neighbours' training, and with a zero learning rate
(Δ = 0) the learners contract towards their mean at every iteration: s^{t+1} = M(s^t).
(Our earlier reading, s^{t+1} = M(w^{t−1}) + Δ^t, mixed each chain only every other
iteration: without progress s^{t+1} = M(s^{t−1}).) With a mean-preserving M the mean
of the starts gains every job's displacement exactly once, one iteration late for
delay-by-one.

Stability at Kaldi's job size. The papers' analyses assume one small SGD step per mix; a
Kaldi job is many minibatches at N·ε, which can pull a learner back most of the way
towards where its training wants it. Write a learner's deviation from the mean along an
eigenvector of M with eigenvalue λ as e, and its job's restoring pull as Δ̃ = −γ e + noise:

    d-psgd, ring:    e ← (λ − γ) e               grows once γ > 1 + λ
    delay-by-one:    z² − λ z + γ = 0            |z| = √γ < 1 for λ² < 4γ: slower, stable
    gossip-average:  e ← λ (1 − γ) e             always contracts

With three-way mixing on a ring of N ≥ 4 (even) the most negative λ is −1/3 (the pattern
+, −, +, − around the ring), so d-psgd's learners fly apart once one job restores more
than 2/3 of a deviation (pairwise mixing has λ ∈ {0, 1} only: that needs γ > 1),
while the mean still moves as averaging's. Measured on the demo (docs/sync-methods.md,
"the learners"; ``benchmarks/bench_sync_paper.py``): γ climbs past 2/3 mid-training and the flipping
mode grows ×1.04–1.15 per iteration until the objective threshold drops a learner.

Files and overlap. Delay-by-one exists for its overlap: the step it adds is one
iteration old, so the mixing of iteration t + 1 can run while the jobs of t train. Here
that is a mix node per (t, j) (rule ``mix_node``): it writes s_j^t = M(s^{t−1})_j +
Δ_j^{t−2} to ``<t+1>/job<j>.start.pt`` (and its record, ``.start.json``) from the
neighbours' starts of t − 1 (their mix nodes' files) and the learner's own job of t − 2,
so it waits for no job of t − 1; job (t, j) reads that file and, for order, its own job
of t − 1. A slow neighbour k therefore never delays job (t + 1, j): only mix node
(t + 2, k), which needs k's job of t, and through it j's mix node of t + 3, so a learner
runs at most about two iterations ahead of a neighbour (bounded staleness). The
neighbours mixed are chosen by the objectives of the jobs whose progress their starts
hold (job (t − 3, k)). d-psgd has no such overlap (its step is the current one): job
(t + 1, j) forms its start itself from the neighbours' start files, which their jobs of t
keep, and its own job of t.
"""

from __future__ import annotations

from paravg.sync.tensors import weighted_sum


def mix_plus_displacement(mixed: dict, own_end: dict, own_start: dict) -> dict:
    """M(s^t)_j + (w_j − s_j) in float64 arithmetic, in the dtype of ``own_end``.

    ``mixed`` = M(s^t)_j; ``own_end``, ``own_start`` = w_j, s_j of the job whose
    displacement is applied (iteration t − 1 for delay-by-one, t for d-psgd).
    """
    return weighted_sum([own_end, mixed, own_start], [1.0, 1.0, -1.0])
