"""Minimum Bayes risk decoding and the confusion network of a word lattice: Kaldi's
``MinimumBayesRisk`` (``src/lat/sausages.{h,cc}``; ``lattice-mbr-decode``,
``lattice-to-ctm-conf``), after Xu, Povey, Mangu & Zhu, *Minimum Bayes risk decoding and
system combination based on a recursion for edit distance* (Computer Speech and Language
25, 2011).

**Input**: an acyclic word lattice whose weights are already scaled (Kaldi:
``lattice-to-ctm-conf --inv-acoustic-scale=LMWT``), nodes 1..N in topological order with
one final node N (``CreateSuperFinal``), arcs a = (s_a, e_a, w_a, p_a) with word w_a (0:
none) and log-likelihood p_a = −(graph + acoustic), and each node's time t(n) (the
frames before it: in a word-aligned lattice, :mod:`paravg.decode.word_align`, a word
boundary).

**The recursion** (the paper's Figures 4-6). R = (0, r_1, 0, r_2, …, r_K, 0) is the
current hypothesis with an epsilon bin between and around its words, Q = 2K + 1. With
α(n) the forward log-probability and l(a, b) = 0 if a = b else 1 (1 + δ, δ = 10⁻⁵, for a
word against an epsilon bin; Kaldi's change to the paper: only where the words differ,
so that every word shows up in some bin), α′(n, q) is the expected edit distance between
the paths into n and r_1..q:

    α′(1, q) = Σ_{j ≤ q} l(0, r_j)
    for an arc a into n:  α′_a(0) = α′(s_a, 0) + l(w_a, 0, δ)
                          α′_a(q) = min(α′(s_a, q−1) + l(w_a, r_q),     (1: w_a in bin q)
                                        α′(s_a, q) + l(w_a, 0, δ),      (2: w_a inserted)
                                        α′_a(q−1) + l(0, r_q))          (3: bin q empty)
    α′(n, q) = Σ_a exp(α(s_a) + p_a − α(n)) α′_a(q)

so that L = α′(N, Q) is the Bayes risk (expected word errors) of R. The backward pass
(Figure 5) sends β′(N, Q) = 1 back along the choices made, and where an arc's word
entered bin q (choice 1) it adds the arc's share to γ(q, w_a), where bin q was empty
(choice 3) to γ(q, 0): γ(q, ·) is bin q's distribution over words (the *sausage*; it
sums to 1), with the times τ_b(q, w) = Σ t(s_a)·share and τ_e(q, w) = Σ t(e_a)·share (for
epsilon, t(e_a) for both: Kaldi's erratum to the paper's Appendix C).

**Decoding** (Figure 6): each bin's most likely entry replaces r_q (with
``decode_mbr``; ties to the higher word id, as Kaldi sorts), the epsilons between words
are renormalised and the statistics recomputed, until nothing changes (at most 100
rounds). R starts as the lattice's best path.

**Outputs** for each word of R: its bin's posterior of that word (the *confidence*) and
its average start and end time τ_b / γ, τ_e / γ; where a word's times overlap the
previous word's, the two share the span [left, right] in proportion to their durations
(``MbrDecode``'s post-processing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DELTA = 1.0e-5  # Kaldi's MinimumBayesRisk::delta()
MAX_ROUNDS = 100


@dataclass
class MbrResult:
    words: list[int]  # the hypothesis, without epsilons
    times: list[tuple[float, float]]  # (start, end) frame of each word
    confidences: list[float]
    bayes_risk: float  # expected word errors of ``words`` (L)
    sausage: list[list[tuple[int, float]]]  # per bin (word, posterior), best first


def _logadd(x: float, y: float) -> float:
    if x < y:
        x, y = y, x
    if y == -math.inf:
        return x
    return x + math.log1p(math.exp(y - x))


def _l(a: int, b: int, penalize: bool = False) -> float:
    if a == b:
        return 0.0
    return 1.0 + DELTA if penalize else 1.0


def _normalize_eps(words: Sequence[int]) -> list[int]:
    """``NormalizeEps``: the words without epsilons, an epsilon before, between and after."""
    out = [0]
    for w in words:
        if w != 0:
            out += [w, 0]
    return out


class MinimumBayesRisk:
    """Kaldi's ``MinimumBayesRisk`` on a prepared lattice (see the module doc).

    ``arcs``: (start node, end node, word, log-likelihood) with nodes 1..``num_nodes`` in
    topological order (node 1 the start, ``num_nodes`` the only final node); ``times``:
    per node (index 1..num_nodes; entry 0 unused), its frame; ``one_best``: the starting
    hypothesis (words, epsilons allowed)."""

    def __init__(
        self,
        num_nodes: int,
        arcs: Sequence[tuple[int, int, int, float]],
        times: Sequence[float],
        one_best: Sequence[int],
        decode_mbr: bool = True,
    ) -> None:
        self.N = num_nodes
        self.arcs = list(arcs)
        self.pre: list[list[int]] = [[] for _ in range(num_nodes + 1)]
        for i, (_, e, _, _) in enumerate(self.arcs):
            self.pre[e].append(i)
        self.times = list(times)
        self.decode_mbr = decode_mbr
        self.R = list(one_best)
        self.L = 0.0
        self.gamma: list[list[tuple[int, float]]] = []
        self.word_times: list[list[tuple[float, float]]] = []
        self.one_best_times: list[list[float]] = []
        self.one_best_confidences: list[float] = []
        self._decode()

    # -- Figure 4
    def _edit_distance(self, Q: int, R: list[int]):
        N = self.N
        alpha = [-math.inf] * (N + 1)
        alpha[1] = 0.0
        ad = [[0.0] * (Q + 1) for _ in range(N + 1)]  # α′(n, q)
        for q in range(1, Q + 1):
            ad[1][q] = ad[1][q - 1] + _l(0, R[q - 1])
        arc_ad = [0.0] * (Q + 1)
        for n in range(2, N + 1):
            a_n = -math.inf
            for i in self.pre[n]:
                s, _, _, p = self.arcs[i]
                a_n = _logadd(a_n, alpha[s] + p)
            alpha[n] = a_n
            row = ad[n]
            for i in self.pre[n]:
                s, _, w, p = self.arcs[i]
                prev = ad[s]
                share = math.exp(alpha[s] + p - a_n)
                arc_ad[0] = prev[0] + _l(w, 0, True)
                row[0] += share * arc_ad[0]
                for q in range(1, Q + 1):
                    r = R[q - 1]
                    a1 = prev[q - 1] + _l(w, r)
                    a2 = prev[q] + _l(w, 0, True)
                    a3 = arc_ad[q - 1] + _l(0, r)
                    arc_ad[q] = min(a1, a2, a3)
                    row[q] += share * arc_ad[q]
        return alpha, ad

    # -- Figure 5
    def _acc_stats(self) -> None:
        R, N = self.R, self.N
        Q = len(R)
        alpha, ad = self._edit_distance(Q, R)
        self.L = ad[N][Q]
        bd = [[0.0] * (Q + 1) for _ in range(N + 1)]  # β′(n, q)
        bd[N][Q] = 1.0
        gamma: list[dict[int, float]] = [{} for _ in range(Q + 1)]
        tau_b: list[dict[int, float]] = [{} for _ in range(Q + 1)]
        tau_e: list[dict[int, float]] = [{} for _ in range(Q + 1)]
        arc_ad = [0.0] * (Q + 1)
        b_arc = [0] * (Q + 1)

        def add(m: dict, w: int, x: float) -> None:
            if x != 0:
                m[w] = m.get(w, 0.0) + x

        t = self.times
        for n in range(N, 1, -1):
            for i in self.pre[n]:
                s, _, w, p = self.arcs[i]
                prev = ad[s]
                arc_ad[0] = prev[0] + _l(w, 0, True)
                for q in range(1, Q + 1):
                    r = R[q - 1]
                    a1 = prev[q - 1] + _l(w, r)
                    a2 = prev[q] + _l(w, 0, True)
                    a3 = arc_ad[q - 1] + _l(0, r)
                    if a1 <= a2:
                        b_arc[q], arc_ad[q] = (1, a1) if a1 <= a3 else (3, a3)
                    else:
                        b_arc[q], arc_ad[q] = (2, a2) if a2 <= a3 else (3, a3)
                share = math.exp(alpha[s] + p - alpha[n])
                bd_arc = [0.0] * (Q + 1)
                for q in range(Q, 0, -1):
                    bd_arc[q] += share * bd[n][q]
                    if b_arc[q] == 1:
                        bd[s][q - 1] += bd_arc[q]
                        add(gamma[q], w, bd_arc[q])
                        add(tau_b[q], w, t[s] * bd_arc[q])
                        add(tau_e[q], w, t[n] * bd_arc[q])
                    elif b_arc[q] == 2:
                        bd[s][q] += bd_arc[q]
                    else:
                        bd_arc[q - 1] += bd_arc[q]
                        add(gamma[q], 0, bd_arc[q])
                        add(tau_b[q], 0, t[n] * bd_arc[q])
                        add(tau_e[q], 0, t[n] * bd_arc[q])
                bd_arc[0] += share * bd[n][0]
                bd[s][0] += bd_arc[0]
        bd_arc = [0.0] * (Q + 1)
        for q in range(Q, 0, -1):
            bd_arc[q] += bd[1][q]
            bd_arc[q - 1] += bd_arc[q]
            add(gamma[q], 0, bd_arc[q])
            add(tau_b[q], 0, t[1] * bd_arc[q])
            add(tau_e[q], 0, t[1] * bd_arc[q])
        # per bin, best first (GammaCompare: posterior down, then word id down)
        self.gamma = [
            sorted(gamma[q].items(), key=lambda x: (-x[1], -x[0])) for q in range(1, Q + 1)
        ]
        self.word_times = [
            [(tau_b[q].get(w, 0.0) / g, tau_e[q].get(w, 0.0) / g) for w, g in self.gamma[q - 1]]
            for q in range(1, Q + 1)
        ]

    # -- Figure 6
    def _decode(self) -> None:
        for counter in range(MAX_ROUNDS + 2):
            self.R = _normalize_eps(self.R)
            self._acc_stats()
            delta_q = 0.0
            self.one_best_times = []
            self.one_best_confidences = []
            for q, bin_ in enumerate(self.gamma):
                if self.decode_mbr:
                    rq, rhat = self.R[q], bin_[0][0]
                    old = next((g for w, g in bin_ if w == rq), 0.0)
                    delta_q += old - bin_[0][1]
                    self.R[q] = rhat
                if self.R[q] == 0:
                    continue
                s = next((j for j, (w, _) in enumerate(bin_) if w == self.R[q]), 0)
                self.one_best_times.append(list(self.word_times[q][s]))
                self._resolve_overlap()
                self.one_best_confidences.append(next((g for w, g in bin_ if w == self.R[q]), 0.0))
            if delta_q == 0 or counter > MAX_ROUNDS:
                break
        self.R = [w for w in self.R if w != 0]

    def _resolve_overlap(self) -> None:
        """Two consecutive words overlapping in time share [left, right] in proportion
        to their durations (Kaldi's post-processing of the one-best times)."""
        times = self.one_best_times
        i = len(times)
        if i > 1 and times[i - 2][1] > times[i - 1][0]:
            prev_right = times[i - 3][1] if i > 2 else 0.0
            left = max(prev_right, min(times[i - 2][0], times[i - 1][0]))
            right = max(times[i - 2][1], times[i - 1][1])
            first = times[i - 2][1] - times[i - 2][0]
            second = times[i - 1][1] - times[i - 1][0]
            mid = left + (right - left) * first / (first + second) if first > 0 else left
            times[i - 2][0], times[i - 2][1] = left, mid
            times[i - 1][0], times[i - 1][1] = mid, right

    def result(self) -> MbrResult:
        return MbrResult(
            words=list(self.R),
            times=[(a, b) for a, b in self.one_best_times],
            confidences=list(self.one_best_confidences),
            bayes_risk=self.L,
            sausage=self.gamma,
        )


def minimum_bayes_risk(clat, decode_mbr: bool = True) -> MbrResult:
    """``MinimumBayesRisk`` of a :class:`paravg.decode.determinize.CompactLattice` whose
    costs are scaled already: a super-final node takes the final weights
    (``CreateSuperFinal``, their strings on its arcs), nodes are numbered 1.. in
    topological order, each node's time is the transition-ids before it
    (``CompactLatticeStateTimes``) and the starting hypothesis is the best path."""
    n = clat.num_states
    if not n:
        return MbrResult([], [], [], 0.0, [])
    order = clat.topological_order()
    node = {s: i + 1 for i, s in enumerate(order)}
    final_node = n + 1
    arcs, lengths = [], []
    for s, d, w, g, a, string in zip(
        clat.src.tolist(), clat.dst.tolist(), clat.word.tolist(), clat.graph.tolist(),
        clat.acoustic.tolist(), clat.strings, strict=True,
    ):  # fmt: skip
        arcs.append((node[s], node[d], w, -(g + a)))
        lengths.append(len(string))
    for s, (g, a, string) in clat.final.items():
        arcs.append((node[s], final_node, 0, -(g + a)))
        lengths.append(len(string))
    arcs_by_start: list[list[int]] = [[] for _ in range(final_node + 1)]
    for i, arc in enumerate(arcs):
        arcs_by_start[arc[0]].append(i)
    times = [0.0] * (final_node + 1)
    best = [-math.inf] * (final_node + 1)
    back = [-1] * (final_node + 1)
    best[1] = 0.0
    for u in range(1, final_node + 1):  # topological: times and the best path (Viterbi)
        for i in arcs_by_start[u]:
            _, v, _, p = arcs[i]
            times[v] = times[u] + lengths[i]
            if best[u] + p > best[v]:
                best[v], back[v] = best[u] + p, i
    words, v = [], final_node
    while v != 1 and back[v] >= 0:
        words.append(arcs[back[v]][2])
        v = arcs[back[v]][0]
    return MinimumBayesRisk(final_node, arcs, times, words[::-1], decode_mbr).result()
