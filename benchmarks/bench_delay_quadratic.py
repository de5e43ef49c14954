"""Delay-by-one against averaging on a quadratic, direction by direction (no training).

The learners' mean error m along an eigenvector of the loss's Hessian with curvature h.
A job is K minibatches of plain SGD at the per-job rate η_t = N·ε_t (Kaldi's), started
from the mean (the learners agree: only the common mode is modelled), so it restores the
fraction

    γ_t = 1 − (1 − η_t·h)^K

of the error it starts with: its displacement is Δ^t = −γ_t·m^t. Then

    averaging:     m^{t+1} = m^t + Δ^t       = (1 − γ_t)·m^t
    delay-by-one:  m^{t+1} = m^t + Δ^{t−1}   = m^t − γ_{t−1}·m^{t−1}   (Δ^{−1} = 0: m^1 = m^0)

ADPSGD's mean moves by the mean displacement whatever the doubly stochastic mixing, so
ring and random-ring follow averaging's line here and delay-by-one the second. What the
pipeline reports for a decentralized method is the consensus, the mean of the jobs' end
models: c^T = m^{T−1} + Δ^{T−1} = (1 − γ_{T−1})·m^{T−1}. With a
constant γ the delayed recursion's slowest root is (1 + √(1 − 4γ))/2 (γ ≤ 1/4), √γ above
(period-6 ringing as γ → 1), against averaging's 1 − γ: the delay is faster for γ < 0.382
and slower above; γ > 1 (one job overshoots) is unstable for the delay, while averaging
is stable up to γ = 2.

Prints, for per-minibatch steps η_0·h from 0.01 to 1.6 (η_t decaying geometrically by
``--decay`` over the run, as Kaldi's effective learning rate), the per-job γ at the start
and the end, and the error left after T iterations, |m^T / m^0| for averaging and
|c^T / m^0| for delay-by-one. Defaults: the TDNN-LSTM
of ``sync_paper_lstm.yaml`` at N = 4 (T = 24 iterations, K = 6 minibatches, 10× decay);
``--iters 73 --minibatches 2`` and ``--iters 146 --minibatches 1`` are the job-size
configs (``sync_job_size_2.yaml``, ``sync_job_size_1.yaml``).

    .venv/bin/python benchmarks/bench_delay_quadratic.py
"""

from __future__ import annotations

import argparse

STEPS = (0.01, 0.03, 0.1, 0.2, 0.3, 0.5, 0.8, 1.0, 1.2, 1.6)


def remaining(step0: float, iters: int, minibatches: int, decay: float) -> tuple[float, ...]:
    """(γ_0, γ_{T−1}, |m^T/m^0| averaging, |m^T/m^0| delay-by-one) at η_0·h = step0."""
    gammas = [
        1.0 - (1.0 - step0 * decay ** (-t / max(1, iters - 1))) ** minibatches for t in range(iters)
    ]
    avg = 1.0
    for g in gammas:
        avg *= 1.0 - g
    prev, cur = 1.0, 1.0  # m^{t−1}, m^t (m^0 = 1; m^1 = m^0)
    for t in range(1, iters - 1):
        prev, cur = cur, cur - gammas[t - 1] * prev
    # cur = m^{T−1}; the consensus c^T is the mean of the last jobs' end models
    return gammas[0], gammas[-1], abs(avg), abs((1.0 - gammas[-1]) * cur)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=24)
    ap.add_argument("--minibatches", type=int, default=6)
    ap.add_argument("--decay", type=float, default=10.0)
    args = ap.parse_args()
    print(
        f"T = {args.iters} iterations of jobs of K = {args.minibatches} minibatches, "
        f"rate decaying {args.decay:g}×\n"
    )
    print(
        "| η_0·h per minibatch | γ first job | γ last job | averaging: error left "
        "| delay-by-one: error left |"
    )
    print("|---|---|---|---|---|")
    for step in STEPS:
        g0, g1, avg, delay = remaining(step, args.iters, args.minibatches, args.decay)
        print(f"| {step:g} | {g0:.3f} | {g1:.3f} | {avg:.1e} | {delay:.1e} |")


if __name__ == "__main__":
    main()
