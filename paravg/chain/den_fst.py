"""The denominator FST: Kaldi's ``CreateDenominatorFst`` (``src/chain/chain-den-graph.cc``,
binary ``src/chainbin/chain-make-den-fst.cc``).

From the phone LM ``G_p`` (an acceptor over phones), the tree and the transition model:

1. ``C ∘ G_p`` with the tree's context width N and central position P (kaldifst
   ``compose_context``, Kaldi's ``ComposeDeterministicOnDemandInverse`` with an
   ``InverseContextFst``); its input labels index ``ilabel_info`` (phone windows).
2. ``H`` from ``ilabel_info`` (kaldi-hmm-gmm ``get_h_transducer``) with
   ``transition_scale = 1`` and, after ``H ∘ (C ∘ G_p)``, self-loops added with
   ``self_loop_scale = 1`` and ``reorder = true`` (``AddSelfLoops``); the topology's
   transition probabilities enter the graph as Kaldi's do (0.5 on every arc of the chain
   topology: a constant factor per frame, which the objective does not see).
3. Projected on the input (transition-ids), mapped to pdf-id + 1 (``MapFstToPdfIdsPlusOne``),
   epsilons removed (``RmEpsilon``).
4. ``DenGraphMinimizeWrapper``: three passes of reverse → push → minimise → reverse →
   push → minimise (``MinimizeAcceptorNoPush``: weights quantised with delta
   ``10 · kDelta``, labels and weights encoded, acceptor-minimised), then epsilons removed
   and pushed once more. ``PushSpecial`` (``src/fstext/push-special.cc``, not in
   kaldifst, so :func:`push_special` here) makes every state's outgoing mass the same
   ``λ``: with ``P_ij`` the summed arc probabilities ``i → j`` (a final probability
   counted as an arc to the start ``I``), ``v`` the top eigenvector by the power method
   ``v ← P v + 0.1 v`` (normalised; stopped when ``log(max_i r_i / min_i r_i) <= δ``,
   ``r_i = Σ_j P_ij v_j / v_i``, checked every 5 of at most 200 iterations), each arc
   ``i → j`` gets ``p v_j / v_i`` and each final ``f_i v_I / v_i``: the factors
   telescope, so every complete path keeps its weight; only where the weight sits
   changes, which lets minimisation merge more states.
5. ``SortOnTransitionCount``: states renumbered by decreasing number of arcs in + out.

The result is an acceptor whose labels are pdf-id + 1 (0 never appears).
"""

from __future__ import annotations

import numpy as np

from paravg.chain.fst_arrays import FstArrays, arrays_to_fst, fst_to_arrays, project_input, relabel

K_DELTA = 1.0 / 1024.0  # OpenFst's kDelta


def num_arcs(fst) -> int:
    return sum(fst.num_arcs(s) for s in range(fst.num_states))


def tid_to_pdf_plus_one(trans_model) -> np.ndarray:
    """table[t] = pdf of transition-id t, plus one (table[0] = 0)."""
    n = trans_model.num_transition_ids
    table = np.zeros(n + 1, dtype=np.int64)
    for t in range(1, n + 1):
        table[t] = trans_model.transition_id_to_pdf(t) + 1
    return table


def transition_id_fst(
    phone_fst, ctx_dep, trans_model, transition_scale: float, self_loop_scale: float
):
    """``H ∘ C ∘ phone_fst`` with self-loops (reorder), projected on transition-ids:
    the part ``CreateDenominatorFst`` and ``ProtoSupervisionToSupervision`` share."""
    import kaldi_hmm_gmm
    import kaldifst

    kaldifst.arcsort(phone_fst, sort_type="ilabel")
    clg, ilabel_info = kaldifst.compose_context(
        disambig_syms=[],
        context_width=ctx_dep.context_width,
        central_position=ctx_dep.central_position,
        ifst=phone_fst,
    )
    kaldifst.arcsort(clg, sort_type="ilabel")
    h, disambig = kaldi_hmm_gmm.get_h_transducer(
        ilabel_info,
        ctx_dep,
        trans_model,
        kaldi_hmm_gmm.HTransducerConfig(transition_scale=transition_scale),
    )
    if disambig:
        raise RuntimeError("H of a phone graph without disambiguation symbols has some")
    kaldifst.arcsort(h, sort_type="olabel")
    ha = kaldifst.compose(h, clg)
    with_loops = kaldi_hmm_gmm.add_self_loops(
        self_loop_scale=self_loop_scale,
        disambig_syms=[],
        reorder=True,
        trans_model=trans_model,
        ifst=ha,
    )
    return project_input(with_loops)


def minimize_acceptor_no_push(fst) -> None:
    """``MinimizeAcceptorNoPush``: quantise (10 kDelta), encode, minimise, decode."""
    import kaldifst

    kaldifst.minimize_encoded(fst, delta=K_DELTA * 10.0)


def push_special(fst, delta: float = K_DELTA * 0.01, max_iter: int = 200):
    """``PushSpecial`` (module docstring): a new FST, every state summing to ``λ``."""
    a = fst_to_arrays(fst)
    n = a.num_states
    if n == 0:
        return fst
    p = np.exp(-a.weight)
    fin = np.exp(-a.final)
    v = np.full(n, 1.0 / np.sqrt(n))

    def accuracy() -> float:
        r = (np.bincount(a.src, weights=p * v[a.dst], minlength=n) + fin * v[a.start]) / v
        return float(np.log(r.max() / r.min()))

    for it in range(max_iter):
        new = 0.1 * v + np.bincount(a.src, weights=p * v[a.dst], minlength=n)
        new += fin * v[a.start]
        v = new / np.sqrt((new * new).sum())
        if it % 5 == 0 and it > 0 and accuracy() <= delta:
            break
    occ = -np.log(v)
    return arrays_to_fst(
        FstArrays(
            n,
            a.start,
            a.src,
            a.dst,
            a.ilabel,
            a.olabel,
            a.weight + occ[a.dst] - occ[a.src],
            a.final + occ[a.start] - occ,
        )
    )


def den_graph_minimize(fst):
    """``DenGraphMinimizeWrapper`` (module docstring)."""
    import kaldifst

    delta = K_DELTA * 0.01
    for _ in range(3):
        rev = push_special(kaldifst.reverse(fst), delta)
        minimize_acceptor_no_push(rev)
        fst = push_special(kaldifst.reverse(rev), delta)
        minimize_acceptor_no_push(fst)
    kaldifst.rmepsilon(fst)
    return push_special(fst, delta)


def sort_on_transition_count(a: FstArrays) -> FstArrays:
    """``SortOnTransitionCount``: state i gets the rank of ``(-(in_i + out_i), i)``."""
    degree = np.bincount(a.src, minlength=a.num_states) + np.bincount(a.dst, minlength=a.num_states)
    order = np.lexsort((np.arange(a.num_states), -degree))  # old ids, new order
    new_id = np.empty(a.num_states, dtype=np.int64)
    new_id[order] = np.arange(a.num_states)
    src, dst = new_id[a.src], new_id[a.dst]
    arc_order = np.lexsort((np.arange(len(src)), src))  # arcs grouped by new source
    return FstArrays(
        num_states=a.num_states,
        start=int(new_id[a.start]),
        src=src[arc_order],
        dst=dst[arc_order],
        ilabel=a.ilabel[arc_order],
        olabel=a.olabel[arc_order],
        weight=a.weight[arc_order],
        final=a.final[order],
    )


def create_denominator_fst(phone_lm, ctx_dep, trans_model):
    """``CreateDenominatorFst``: the den FST (kaldifst, labels pdf-id + 1) and a log of
    its sizes along the way (Kaldi's ``KALDI_LOG`` lines)."""
    import kaldifst

    if phone_lm.num_states == 0:
        raise ValueError("the phone LM is empty")
    log = [f"phone-LM FST: {phone_lm.num_states} states, {num_arcs(phone_lm)} arcs"]
    tid_fst = transition_id_fst(phone_lm.copy(), ctx_dep, trans_model, 1.0, 1.0)
    fst = relabel(tid_fst, tid_to_pdf_plus_one(trans_model))
    log.append(f"transition-id FST: {fst.num_states} states, {num_arcs(fst)} arcs")
    kaldifst.rmepsilon(fst)
    log.append(f"after removing epsilons: {fst.num_states} states, {num_arcs(fst)} arcs")
    fst = den_graph_minimize(fst)
    log.append(f"after minimisation: {fst.num_states} states, {num_arcs(fst)} arcs")
    arrays = sort_on_transition_count(fst_to_arrays(fst))
    seen = np.zeros(trans_model.num_pdfs, dtype=bool)
    seen[arrays.ilabel - 1] = True
    if not seen.all():
        log.append(f"pdf-ids not seen in the denominator graph: {np.flatnonzero(~seen).tolist()}")
    return arrays_to_fst(arrays), log
