"""The leaky-HMM denominator against brute force: log Z, gradients, occupancies."""

import itertools
import math

import numpy as np
import pytest
import torch

from paravg.chain.den_graph import DenominatorGraph
from paravg.chain.denominator import den_backward, den_forward, denominator_logz
from paravg.chain.fst_arrays import FstArrays

# 3 states, 7 arcs over 4 pdfs (a self-loop, parallel arcs, a cycle), as in a den FST
SRC = [0, 0, 0, 1, 1, 2, 2]
DST = [0, 1, 1, 2, 0, 2, 0]
PDF = [0, 1, 2, 3, 1, 2, 0]
PROB = [0.3, 0.2, 0.4, 0.5, 0.25, 0.6, 0.3]


def tiny_graph(dtype=torch.float64) -> DenominatorGraph:
    a = FstArrays(
        num_states=3,
        start=0,
        src=np.array(SRC),
        dst=np.array(DST),
        ilabel=np.array(PDF) + 1,
        olabel=np.array(PDF) + 1,
        weight=-np.log(PROB),
        final=np.array([0.0, np.inf, -math.log(0.1)]),
    )
    return DenominatorGraph.from_arrays(a, num_pdfs=4, dtype=dtype)


def brute_force_logz(graph, x, leaky):
    """Σ over every path: start s ~ π; at each of the T + 1 frame boundaries either stay
    or leak to h with weight η π(h); between them one arc, weight p · exp(x_t(pdf))."""
    T, B, _ = x.shape
    pi = graph.initial_probs.tolist()
    S = graph.num_states
    arcs = list(zip(SRC, DST, PDF, PROB, strict=True))
    moves = [None, *range(S)] if leaky else [None]  # stay, or leak to h
    out = []
    for b in range(B):
        total = 0.0
        for s0 in range(S):
            for arc_seq in itertools.product(range(len(arcs)), repeat=T):
                for leaks in itertools.product(moves, repeat=T + 1):
                    w, s = pi[s0], s0
                    for t in range(T + 1):
                        if leaks[t] is not None:
                            w *= leaky * pi[leaks[t]]
                            s = leaks[t]
                        if t == T:
                            break
                        src, dst, pdf, p = arcs[arc_seq[t]]
                        if src != s:
                            w = 0.0
                            break
                        w *= p * math.exp(float(x[t, b, pdf]))
                        s = dst
                    total += w
        out.append(math.log(total))
    return torch.tensor(out, dtype=torch.float64)


def matrix_logz(graph, x, leaky):
    """The leaky HMM's formula with dense matrices (differentiable by autograd):
    Z = π' L M_0 L M_1 ... L M_{T-1} L 1, L = I + η 1 π', M_t[i, j] = Σ_{arcs i→j} p e^{x_t}."""
    T, B, _ = x.shape
    S = graph.num_states
    pi = graph.initial_probs.to(x.dtype)
    L = torch.eye(S, dtype=x.dtype) + leaky * torch.ones(S, 1, dtype=x.dtype) * pi[None]
    out = []
    for b in range(B):
        v = pi @ L
        for t in range(T):
            M = torch.zeros(S, S, dtype=x.dtype)
            M = M.index_put(
                (graph.from_state, graph.to_state),
                graph.prob.to(x.dtype) * x[t, b, graph.pdf].exp(),
                accumulate=True,
            )
            v = v @ M @ L
        out.append(v.sum().log())
    return torch.stack(out)


@pytest.mark.parametrize(("leaky", "frames"), [(0.0, 5), (0.1, 2)])
def test_logz_equals_brute_force_enumeration(leaky, frames):
    g = tiny_graph()
    x = torch.randn(frames, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    logz, _ = den_forward(g, x, leaky)
    assert torch.allclose(logz, brute_force_logz(g, x, leaky), rtol=1e-10, atol=1e-10)


def test_leaky_hmm_matches_the_formula_on_long_sequences():
    g = tiny_graph()
    x = 3 * torch.randn(40, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for leaky in (1e-5, 0.1, 0.5):
        logz, _ = den_forward(g, x, leaky)
        assert torch.allclose(logz, matrix_logz(g, x, leaky), rtol=1e-10)
    # the leak adds probability: log Z grows with η
    assert (den_forward(g, x, 0.1)[0] > den_forward(g, x, 1e-5)[0]).all()


def test_gradient_equals_autograd_and_finite_differences():
    g = tiny_graph()
    x = torch.randn(6, 2, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    x.requires_grad_(True)
    weights = torch.tensor([0.7, -1.3], dtype=torch.float64)
    (denominator_logz(g, x, 0.1) * weights).sum().backward()
    x2 = x.detach().clone().requires_grad_(True)
    (matrix_logz(g, x2, 0.1) * weights).sum().backward()
    assert torch.allclose(x.grad, x2.grad, atol=1e-10)
    xs = x.detach()[:3].clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda y: denominator_logz(g, y, 0.1), (xs,))


def test_occupancies_sum_to_one_per_frame_in_float32():
    g = tiny_graph(torch.float32)
    x = 5 * torch.randn(50, 4, 4, generator=torch.Generator().manual_seed(4))
    logz, saved = den_forward(g, x, 0.1)
    occ = den_backward(g, saved, 0.1)
    assert occ.shape == x.shape and (occ >= 0).all()
    assert torch.allclose(occ.sum(-1), torch.ones(50, 4), atol=1e-4)
    # float32 with per-frame rescaling agrees with float64
    logz64, _ = den_forward(tiny_graph(), x.double(), 0.1)
    assert torch.allclose(logz.double(), logz64, rtol=1e-5)


def test_outputs_are_clamped_to_30_as_kaldi():
    g = tiny_graph()
    x = torch.zeros(2, 1, 4, dtype=torch.float64)
    big = x.clone()
    big[0, 0, 1] = 100.0
    clamped = x.clone()
    clamped[0, 0, 1] = 30.0
    assert den_forward(g, big, 0.1)[0] == pytest.approx(den_forward(g, clamped, 0.1)[0])


def test_rejects_wrong_pdf_count_and_leaky():
    g = tiny_graph()
    with pytest.raises(ValueError, match="columns"):
        den_forward(g, torch.zeros(2, 1, 5), 0.1)
    with pytest.raises(ValueError, match="leaky"):
        den_forward(g, torch.zeros(2, 1, 4), 1.0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_same_code_on_cuda():
    g = tiny_graph(torch.float32)
    x = torch.randn(20, 3, 4)
    cpu = denominator_logz(g, x, 0.1)
    gpu = denominator_logz(g.to("cuda"), x.cuda(), 0.1)
    assert torch.allclose(cpu, gpu.cpu(), rtol=1e-5)
