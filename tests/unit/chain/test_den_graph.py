"""The chain topology, the denominator FST, its initial probabilities and the
normalisation FST."""

import math

import numpy as np
import pytest

from paravg.chain.den_graph import DenominatorGraph, initial_probs, normalization_fst
from paravg.chain.fst_arrays import fst_to_arrays
from paravg.chain.topology import chain_topo_text


def accepts(a, labels):
    """Total probability of the label sequence from the start (any end state)."""
    cur = {a.start: 1.0}
    for lab in labels:
        nxt = {}
        for s, p in cur.items():
            for i in np.flatnonzero((a.src == s) & (a.ilabel == lab)):
                d = int(a.dst[i])
                nxt[d] = nxt.get(d, 0.0) + p * math.exp(-a.weight[i])
        cur = nxt
    return cur


def test_chain_topology_is_gen_topo_py():
    text = chain_topo_text([4, 5], [1, 2])
    assert "<ForPhones>\n1 2 4 5\n</ForPhones>" in text
    assert (
        "<State> 0 <ForwardPdfClass> 0 <SelfLoopPdfClass> 1 <Transition> 0 0.5 "
        "<Transition> 1 0.5 </State>\n<State> 1 </State>"
    ) in text
    with pytest.raises(ValueError):
        chain_topo_text([1], [1])


def test_den_fst_of_one_sentence_accepts_its_pdf_sequences(chain_models):
    from paravg.chain.den_fst import create_denominator_fst
    from paravg.chain.phone_lm import estimate_phone_lm

    ctx_dep, tm = chain_models
    lm, _ = estimate_phone_lm([[1, 2]])
    fst, log = create_denominator_fst(lm, ctx_dep, tm)
    a = fst_to_arrays(fst)
    assert (a.ilabel == a.olabel).all() and a.ilabel.min() >= 1
    # pdf + 1 of phone p: forward 2p - 1, self-loop 2p (monophone tree)
    for path in ([1, 3], [1, 2, 2, 3, 4], [1, 3, 4, 4]):
        assert accepts(a, path)
    for path in ([3, 1], [2, 1], [1, 5], [1, 1]):
        assert not accepts(a, path)
    assert "pdf-ids not seen" in log[-1]  # phone 3 is not in the LM


def test_initial_probs_and_normalization_fst(den_fst, chain_models):
    a = fst_to_arrays(den_fst)
    init = initial_probs(a)
    assert init.sum() == pytest.approx(1.0) and (init > 0).all()
    # states are sorted by decreasing number of arcs in + out
    degree = np.bincount(a.src, minlength=a.num_states) + np.bincount(a.dst, minlength=a.num_states)
    assert (np.diff(degree) <= 0).all()
    norm = fst_to_arrays(normalization_fst(den_fst, init))
    assert (norm.ilabel > 0).all()  # epsilons removed
    assert np.isfinite(norm.final).sum() >= a.num_states  # every den state may end
    # one symbol k from the normalisation start reaches d with weight π_s p of the
    # epsilon + arc paths s -> d, combined as the tropical semiring does (the best one)
    for k in (1, 2, 3):
        best: dict[int, float] = {}
        for s, d, lab, w in zip(a.src, a.dst, a.ilabel, a.weight, strict=True):
            if lab == k:
                best[int(d)] = max(best.get(int(d), 0.0), init[s] * math.exp(-w))
        got = accepts(norm, [k])
        assert sorted(got.values()) == pytest.approx(sorted(best.values()), rel=1e-4)
    g = DenominatorGraph.from_fst(den_fst, chain_models[1].num_pdfs)
    assert g.num_arcs == a.num_arcs and g.initial_probs.sum().item() == pytest.approx(1.0)


def test_push_special_makes_every_state_sum_to_lambda_and_keeps_path_weights():
    import kaldifst

    from paravg.chain.den_fst import push_special

    fst = kaldifst.compile(
        "0 1 1 1 0.5\n0 0 2 2 1.2\n1 2 3 3 0.1\n1 0 1 1 2.0\n2 0 2 2 0.7\n2 1.5\n",
        acceptor=False,
    )
    before, after = fst_to_arrays(fst), fst_to_arrays(push_special(fst, delta=1e-6, max_iter=2000))
    sums = [
        np.exp(-after.weight[after.src == s]).sum() + np.exp(-after.final[s])
        for s in range(after.num_states)
    ]
    assert np.allclose(sums, sums[0], rtol=1e-4)
    # before, the states summed to 0.91, 1.04 and 0.72 (with its final probability)
    # every complete path keeps its weight (v_j / v_i telescopes to v_I / v_I)
    for labels in ([1, 3], [2, 1, 3], [1, 1, 3, 2, 1, 3]):
        p0 = sum(p * math.exp(-before.final[s]) for s, p in accepts(before, labels).items())
        p1 = sum(p * math.exp(-after.final[s]) for s, p in accepts(after, labels).items())
        assert p1 == pytest.approx(p0, rel=1e-5)
