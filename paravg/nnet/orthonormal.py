"""The semi-orthogonal constraint of TDNN-F (``ConstrainOrthonormal`` /
``ConstrainOrthonormalInternal`` in ``src/nnet3/nnet-utils.cc``).

A component with ``orthonormal-constraint`` ≠ 0 (the ``tdnnf-layer``'s ``.linear``, the
``linear-component`` and the prefinal layer's ``.linear``: all −1, the *floating* scale)
has, after the parameter update of a minibatch, with probability 1/4 (``RandInt(0, 3) ==
0``, each component on its own draw), its linear matrix M moved towards α·(a
semi-orthogonal matrix). Kaldi works on the smaller Gram matrix: on M when rows ≤ cols,
else on Mᵀ (copied back). With P = M Mᵀ:

* fixed scale (constraint α > 0): the target is P = α² I;
* floating scale (constraint < 0): if tr(P) < 1e-15 nothing happens (an unused
  component); else α² = tr(P P) / tr(P), the choice that leaves the update orthogonal to
  M, so M's overall size stays free;
* ν = 1/8 (``update_speed``); ρ = rows · tr(P P) / tr(P)² (≥ 1, 1 when semi-orthogonal
  up to scale): ν is halved when ρ > 1.02 and halved again when ρ > 1.1;
* Q = P − α² I,  M ← M − (4ν / α²) Q M.

Computed in float64 and written back in M's dtype.
"""

from __future__ import annotations

import numpy as np
import torch

CONSTRAIN_PROBABILITY_DENOMINATOR = 4  # RandInt(0, 3) == 0
UPDATE_SPEED = 0.125


@torch.no_grad()
def constrain_orthonormal(weight: torch.Tensor, constraint: float) -> bool:
    """One step of the constraint on ``weight`` in place; False when skipped (tr P ≈ 0)."""
    if constraint == 0.0:
        return False
    transpose = weight.shape[0] > weight.shape[1]
    m = (weight.t() if transpose else weight).double()
    rows = m.shape[0]
    p = m @ m.t()
    trace_p = float(torch.trace(p))
    if constraint < 0.0:
        if trace_p < 1.0e-15:
            return False
        trace_p_p = float((p * p).sum())  # tr(P P), P symmetric
        alpha_sq = trace_p_p / trace_p
        ratio = rows * trace_p_p / trace_p**2
        speed = UPDATE_SPEED
        if ratio > 1.02:
            speed *= 0.5
            if ratio > 1.1:
                speed *= 0.5
    else:
        alpha_sq = constraint * constraint
        speed = UPDATE_SPEED
    q = p - alpha_sq * torch.eye(rows, dtype=torch.float64, device=m.device)
    m = m - (4.0 * speed / alpha_sq) * (q @ m)
    (weight.t() if transpose else weight).copy_(m.to(weight.dtype))
    return True


def constrain_components(components, rng: np.random.Generator) -> int:
    """Kaldi's ``ConstrainOrthonormal(nnet)``: each constrained component, in order, with
    probability 1/4 from ``rng``; returns how many were constrained."""
    done = 0
    for comp in components:
        if comp.orthonormal_constraint == 0.0:
            continue
        if int(rng.integers(0, CONSTRAIN_PROBABILITY_DENOMINATOR)) != 0:
            continue
        done += constrain_orthonormal(comp.weight, comp.orthonormal_constraint)
    return done
