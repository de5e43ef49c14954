"""The log-space numerator against brute force, and supervision from alignments."""

import itertools
import math

import numpy as np
import pytest
import torch

from paravg.chain.fst_arrays import FstArrays
from paravg.chain.numerator import NumeratorGraph, num_forward_backward
from paravg.chain.supervision import (
    SupervisionOptions,
    alignment_supervision,
    alignment_to_phone_durations,
    alignment_to_proto_supervision,
    split_to_phones,
)

from .numerator_loss import numerator_logprob


def acceptor(arcs, finals, num_states):
    src, dst, lab, w = (np.array(c) for c in zip(*arcs, strict=True))
    final = np.full(num_states, np.inf)
    for s, fw in finals.items():
        final[s] = fw
    return FstArrays(num_states, 0, src, dst, lab, lab.copy(), np.asarray(w, float), final)


# two sequences of 3 frames: a lattice-like acceptor and a linear one (labels pdf + 1)
SUP_A = acceptor(
    [
        (0, 1, 1, 0.1),
        (0, 2, 2, 0.5),
        (1, 3, 3, 0.2),
        (2, 3, 3, 0.0),
        (2, 4, 1, 1.0),
        (3, 5, 2, 0.3),
        (4, 5, 4, 0.1),
        (4, 5, 2, 0.7),
    ],
    {5: 0.25},
    6,
)
SUP_B = acceptor([(0, 1, 4, 0.0), (1, 2, 4, 0.4), (2, 3, 1, 0.0)], {3: 0.0}, 4)


def paths(a, frames):
    """Every (labels, log weight) path of an acceptor of ``frames`` arcs."""
    out = []

    def walk(s, labels, logw):
        if len(labels) == frames:
            if np.isfinite(a.final[s]):
                out.append((labels, logw - a.final[s]))
            return
        for i in np.flatnonzero(a.src == s):
            walk(int(a.dst[i]), [*labels, int(a.ilabel[i])], logw - a.weight[i])

    walk(a.start, [], 0.0)
    return out


def brute_force_logp(sups, x):
    """logsumexp over every path of Σ_t (w_t + x_t(b, pdf_t)), differentiable."""
    out = []
    for b, a in enumerate(sups):
        terms = [
            lw + sum(x[t, b, lab - 1] for t, lab in enumerate(labels))
            for labels, lw in paths(a, x.shape[0])
        ]
        out.append(torch.logsumexp(torch.stack([torch.as_tensor(v) for v in terms]), 0))
    return torch.stack(out)


def test_numerator_logprob_and_gradient_equal_brute_force():
    g = NumeratorGraph.from_fsts([SUP_A, SUP_B], frames=3, num_pdfs=4)
    x = torch.randn(3, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    x.requires_grad_(True)
    logp = numerator_logprob(g, x)
    x2 = x.detach().clone().requires_grad_(True)
    want = brute_force_logp([SUP_A, SUP_B], x2)
    assert torch.allclose(logp, want, atol=1e-12)
    (logp * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum().backward()
    (want * torch.tensor([1.0, 2.0], dtype=torch.float64)).sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-12)
    assert torch.autograd.gradcheck(
        lambda y: numerator_logprob(g, y), (x.detach().clone().requires_grad_(),)
    )
    _, occ = num_forward_backward(g, x.detach())
    assert torch.allclose(occ.sum(-1), torch.ones(3, 2, dtype=torch.float64))


def test_numerator_rejects_graphs_that_are_not_time_synchronous():
    bad = acceptor([(0, 1, 1, 0.0), (1, 2, 1, 0.0), (0, 2, 2, 0.0)], {2: 0.0}, 3)
    with pytest.raises(ValueError, match="time-synchronous"):
        NumeratorGraph.from_fsts([bad], frames=2, num_pdfs=2)
    with pytest.raises(ValueError, match="at frame 2"):
        NumeratorGraph.from_fsts([SUP_B], frames=2, num_pdfs=4)


def test_proto_supervision_tolerances_and_subsampling():
    # phones 1 2 3 lasting 3, 6, 3 input frames; tolerance 1, subsampling 3 -> 4 frames
    proto = alignment_to_proto_supervision([1, 2, 3], [3, 6, 3], SupervisionOptions(1, 1, 3))
    assert proto.allowed_phones == [[1], [1, 2], [2], [2, 3]]
    # Kaldi's defaults (5, 5, 3): phone 1 on input frames [0, 8), 2 on [0, 12), 3 on [4, 12)
    proto = alignment_to_proto_supervision([1, 2, 3], [3, 6, 3], SupervisionOptions())
    assert proto.allowed_phones == [[1, 2], [1, 2], [1, 2, 3], [2, 3]]
    with pytest.raises(ValueError):
        SupervisionOptions(0, 1, 3).check()
    assert alignment_to_phone_durations([1, 1, 1, 2, 2, 3]) == ([1, 2, 3], [3, 2, 1])


def test_supervision_admits_exactly_the_hand_built_paths(chain_models):
    """Phones 1 2 3 over 3 + 6 + 3 input frames, tolerance 1, subsampling 3: phone 1 must
    start at frame 0 and may last 1 or 2 frames, phone 2 covers frame 2, phone 3 only
    frame 3. With the chain topology (forward pdf first, then self-loop pdfs) and the
    monophone tree (pdf+1 of phone p: forward 2p - 1, self-loop 2p) that is exactly
    f1 l1 f2 f3 and f1 f2 l2 f3."""
    ctx_dep, tm = chain_models
    sup = alignment_supervision(
        [1, 2, 3], [3, 6, 3], ctx_dep, tm, None, SupervisionOptions(1, 1, 3)
    )
    got = sorted(tuple(labels) for labels, _ in paths(sup, 4))
    assert got == [(1, 2, 3, 5), (1, 3, 4, 5)]
    # default tolerances: phone 1 lasts 1 or 2 frames, phone 3 starts at frame 2 or 3
    sup = alignment_supervision([1, 2, 3], [3, 6, 3], ctx_dep, tm)
    got = sorted(tuple(labels) for labels, _ in paths(sup, 4))
    want = sorted(
        tuple([1] + [2] * (d1 - 1) + [3] + [4] * (d2 - 1) + [5] + [6] * (3 - d1 - d2))
        for d1, d2 in itertools.product(range(1, 3), range(1, 3))
        if d1 + d2 <= 3
    )
    assert got == want
    with pytest.raises(ValueError, match="empty"):
        alignment_supervision([1, 2, 3, 1], [1, 1, 1, 1], ctx_dep, tm)  # 4 phones, 2 frames


def test_normalised_supervision_keeps_its_paths_with_den_weights(chain_models, den_fst):
    from paravg.chain.den_graph import normalization_fst

    ctx_dep, tm = chain_models
    norm = normalization_fst(den_fst)
    plain = alignment_supervision(
        [1, 2, 3], [3, 6, 3], ctx_dep, tm, None, SupervisionOptions(1, 1, 3)
    )
    weighted = alignment_supervision(
        [1, 2, 3], [3, 6, 3], ctx_dep, tm, norm, SupervisionOptions(1, 1, 3)
    )
    got = paths(weighted, 4)
    assert sorted(tuple(p) for p, _ in got) == sorted(tuple(p) for p, _ in paths(plain, 4))
    assert all(lw < 0 and math.isfinite(lw) for _, lw in got)  # probabilities below one


def test_split_to_phones_keeps_a_repeated_phone_two_phones(chain_models):
    """Transition-ids of the chain topology here: phone p's self-loop 2p - 1, its
    forward (final) transition 2p; reordered, a phone is forward then self-loops."""
    _, tm = chain_models
    ali = [2, 1, 1, 2, 1, 4, 6, 5, 5]  # phone 1 (3 frames), 1 (2), 2 (1), 3 (3)
    assert split_to_phones(ali, tm) == ([1, 1, 2, 3], [3, 2, 1, 3])
    frame_phones = [tm.transition_id_to_phone(t) for t in ali]
    assert alignment_to_phone_durations(frame_phones) == ([1, 2, 3], [5, 1, 3])
    with pytest.raises(ValueError, match="does not end"):
        split_to_phones([2, 1], tm, reordered=False)  # not reordered, a loop after the exit
    with pytest.raises(ValueError, match="phone changes"):
        split_to_phones([2, 1, 3], tm, reordered=False)
