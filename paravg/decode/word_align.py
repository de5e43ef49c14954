"""Word alignment of a CompactLattice: Kaldi's ``lattice-align-words``.

Mirrors ``LatticeWordAligner`` of ``src/lat/word-align-lattice.cc`` (``WordAlignLattice``)
with ``phones/word_boundary.int`` (Kaldi's ``WordBoundaryInfo``; paravg's lang dirs write
it from position-dependent phones: ``_B`` begin, ``_I`` internal, ``_E`` end, ``_S``
singleton, silence nonword) and the transition model's ``IsFinal`` / ``IsSelfLoop``
(:class:`paravg.graph.load.TransitionInfo`), for graphs built with self-loop reordering
(``--reorder=true``, the default; paravg's graphs are).

In a determinised lattice a word label sits on some arc near its phones, and an arc's
transition-ids may run across word boundaries. The aligned lattice has one arc per word
(its label and exactly its transition-ids, from the first of its begin phone to the last
self-loop of its end phone) and one word-less arc per silence phone, so that a state's
time (the number of transition-ids before it) is a word boundary: what the CTM's times
and the confusion network's bins (:mod:`paravg.decode.mbr`) read.

**Construction** (the product of the lattice with a *computation state*: the
transition-ids and word labels seen along the path and not yet output). With a
super-final state added (``CreateSuperFinal``), from each (lattice state, computation
state) tuple:

* if the computation state holds a whole unit at its front, one arc outputs it
  (``OutputArc``): a *normal word* (a begin phone through its final transition and
  self-loops, internal phones, an end phone likewise, then at least one transition-id of
  the next phone, so that the end is known), a *one-phone word* (a singleton phone) or
  *silence* (a nonword phone; an arc without a word). A word takes the first pending word
  label;
* else each lattice arc moves the tuple on (``Advance``: its transition-ids and word
  appended, its weight on a new epsilon arc), and at the super-final state an empty
  computation state is final, a non-empty one is flushed by ``OutputArcForce`` (the
  last word or silence, whose end the lattice's end marks).

Epsilon arcs are then removed (``RmEpsilon``: each state's epsilon closure, its best
weight per state reached, the weight moved onto the arcs and final weights leaving it)
and the result connected. A lattice whose phones do not spell words in order (a broken
lattice or a wrong ``word_boundary.int``) still gives a lattice, with ``error`` set, as
Kaldi warns and goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from paravg.decode.determinize import CompactLattice

NONWORD, BEGIN, END, INTERNAL, SINGLETON = "nonword", "begin", "end", "internal", "singleton"


@dataclass
class WordBoundaryInfo:
    """``phones/word_boundary.int`` with the transition model's per-transition-id maps."""

    boundary: Mapping[int, str]  # phone -> nonword | begin | end | internal | singleton
    tid_to_phone: np.ndarray
    tid_is_final: np.ndarray
    tid_is_self_loop: np.ndarray
    reorder: bool = True

    @classmethod
    def from_transitions(cls, boundary: Mapping[int, str], trans) -> WordBoundaryInfo:
        return cls(
            boundary,
            np.asarray(trans.tid_to_phone).tolist(),
            np.asarray(trans.tid_is_final).tolist(),
            np.asarray(trans.tid_is_self_loop).tolist(),
        )

    def kind(self, tid: int) -> str | None:
        return self.boundary.get(self.tid_to_phone[tid])


class _State:
    """A computation state's outputs: ``error`` set once something did not parse."""

    def __init__(self, info: WordBoundaryInfo) -> None:
        self.info = info
        self.error = False

    def _phone_end(self, tids: tuple, i: int) -> int | None:
        """From position ``i`` (in a phone), one past its final transition-id and the
        self-loops after it (``reorder``); None when the phone, or the lattice
        so far, has not shown its end (Kaldi requires one transition-id after it)."""
        info, n = self.info, len(tids)
        phone = info.tid_to_phone[tids[i]]
        while i < n and not info.tid_is_final[tids[i]]:
            if info.tid_to_phone[tids[i]] != phone:
                self.error = True  # the phone changed before its final transition
            i += 1
        if i == n:
            return None
        i += 1
        if info.reorder:
            while i < n and info.tid_is_self_loop[tids[i]]:
                i += 1
        if i == n:
            return None
        if info.tid_to_phone[tids[i - 1]] != phone:
            self.error = True
        return i

    def output_arc(self, tids: tuple, words: tuple):
        """``OutputArc``: (label, string, remaining tids, remaining words), or None."""
        if not tids:
            return None
        info = self.info
        kind = info.kind(tids[0])
        if kind == NONWORD:  # OutputSilenceArc
            i = self._phone_end(tids, 0)
            return None if i is None else (0, tids[:i], tids[i:], words)
        if not words:
            return None
        if kind == SINGLETON:  # OutputOnePhoneWordArc
            i = self._phone_end(tids, 0)
            return None if i is None else (words[0], tids[:i], tids[i:], words[1:])
        if kind != BEGIN:  # OutputNormalWordArc needs a begin phone first
            return None
        i = self._phone_end(tids, 0)
        if i is None:
            return None
        n = len(tids)
        while i < n and info.kind(tids[i]) != END:
            if info.kind(tids[i]) != INTERNAL:
                self.error = True
            i += 1
        if i == n:
            return None
        i = self._phone_end(tids, i)
        if i is None:
            return None
        return words[0], tids[:i], tids[i:], words[1:]

    def output_arc_force(self, tids: tuple, words: tuple):
        """``OutputArcForce`` at the lattice's end: the pending word (or silence, or a
        partial word without a label) with every remaining transition-id."""
        if words and tids:
            if not self._plausible_word(tids):
                self.error = True
            return words[0], tids, (), words[1:]
        if words:  # word labels without transition-ids: dropped, an error
            self.error = True
            return 0, (), (), ()
        if self.info.kind(tids[0]) != NONWORD:
            self.error = True  # a partial word
        return 0, tids, (), ()

    def _plausible_word(self, tids: tuple) -> bool:
        """``IsPlausibleWord``: a singleton phone, or a begin ... end phone, ending on its
        final transition (and self-loops)."""
        info = self.info
        first, last = info.kind(tids[0]), info.kind(tids[-1])
        same = info.tid_to_phone[tids[0]] == info.tid_to_phone[tids[-1]]
        if not ((first == SINGLETON and same) or (first == BEGIN and last == END)):
            return False
        i = len(tids) - 1
        while info.reorder and i > 0 and info.tid_is_self_loop[tids[i]]:
            i -= 1
        return bool(info.tid_is_final[tids[i]])


def _better(x: tuple, y: tuple | None) -> bool:
    """LatticeWeight order on (graph, acoustic): lower g + a, ties to the lower g."""
    return y is None or (x[0] + x[1], x[0]) < (y[0] + y[1], y[0])


def word_align_lattice(
    clat: CompactLattice, info: WordBoundaryInfo, max_states: int = 0
) -> tuple[CompactLattice, bool]:
    """``WordAlignLattice``: the word-aligned lattice (see the module doc) and whether it
    aligned without error (False as well when ``max_states`` > 0 stopped it)."""
    n_in = clat.num_states
    out_arcs_in: list[list[tuple]] = [[] for _ in range(n_in + 1)]
    for s, d, w, g, a, string in zip(
        clat.src.tolist(), clat.dst.tolist(), clat.word.tolist(), clat.graph.tolist(),
        clat.acoustic.tolist(), clat.strings, strict=True,
    ):  # fmt: skip
        out_arcs_in[s].append((d, w, g, a, tuple(string)))
    superfinal = n_in  # CreateSuperFinal
    for s, (g, a, string) in clat.final.items():
        out_arcs_in[s].append((superfinal, 0, g, a, tuple(string)))
    state = _State(info)
    ids: dict[tuple, int] = {}
    queue: list[tuple] = []
    eps: list[list[tuple]] = []  # per output state: (dst, g, a)
    arcs: list[list[tuple]] = []  # per output state: (dst, label, g, a, string)
    finals: dict[int, tuple] = {}

    def state_for(t: tuple) -> int:
        sid = ids.get(t)
        if sid is None:
            sid = ids[t] = len(eps)
            eps.append([])
            arcs.append([])
            queue.append((t, sid))
        return sid

    ok = True
    if n_in:
        state_for((0, (), ()))
    while queue:
        if max_states > 0 and len(eps) > max_states:
            ok = False
            break
        (s, tids, words), sid = queue.pop()
        out = state.output_arc(tids, words)
        if out is not None:
            label, string, tids2, words2 = out
            arcs[sid].append((state_for((s, tids2, words2)), label, 0.0, 0.0, string))
            continue
        if s == superfinal:
            if not tids and not words:
                finals[sid] = (0.0, 0.0)
            else:
                label, string, tids2, words2 = state.output_arc_force(tids, words)
                arcs[sid].append((state_for((s, tids2, words2)), label, 0.0, 0.0, string))
        for d, w, g, a, string in out_arcs_in[s]:
            nxt = state_for((d, tids + string, (*words, w) if w else words))
            eps[sid].append((nxt, g, a))
    aligned = _remove_epsilons(len(eps), eps, arcs, finals)
    return aligned, ok and not state.error


def _remove_epsilons(n: int, eps, arcs, finals) -> CompactLattice:
    """``RmEpsilon`` then ``Connect``, the states renumbered in topological order."""
    closures: dict[int, dict[int, tuple]] = {}

    def closure(s: int) -> dict[int, tuple]:
        """Every state reached from ``s`` over epsilon arcs, with the best weight."""
        best = {s: (0.0, 0.0)}
        stack = [s]
        order = []
        while stack:  # the epsilon arcs are acyclic: a DFS in topological order
            u = stack.pop()
            order.append(u)
            for d, _, _ in eps[u]:
                if d not in best:
                    best[d] = None
                    stack.append(d)
        order = _topological_subset(order, eps)
        for u in order:
            gu, au = best[u]
            for d, g, a in eps[u]:
                w = (gu + g, au + a)
                if _better(w, best[d]):
                    best[d] = w
        return best

    new_arcs: list[tuple] = []
    new_finals: dict[int, tuple] = {}
    todo, seen = [0] if n else [], {0} if n else set()
    while todo:
        s = todo.pop()
        closures[s] = closure(s)
        for u, (gu, au) in closures[s].items():
            for d, label, g, a, string in arcs[u]:
                new_arcs.append((s, d, label, gu + g, au + a, string))
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
            if u in finals:
                w = (gu + finals[u][0], au + finals[u][1])
                if _better(w, new_finals.get(s)):
                    new_finals[s] = w
    return _connected(n, new_arcs, new_finals)


def _topological_subset(states: list[int], eps) -> list[int]:
    """``states`` (closed under epsilon arcs) in an order where every epsilon arc goes
    forward (Kahn's algorithm on the arcs among them)."""
    indeg = dict.fromkeys(states, 0)
    for u in states:
        for d, _, _ in eps[u]:
            indeg[d] += 1
    ready = [u for u in states if indeg[u] == 0]
    out = []
    while ready:
        u = ready.pop()
        out.append(u)
        for d, _, _ in eps[u]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    return out


def _connected(n: int, arcs: list[tuple], finals: dict) -> CompactLattice:
    """The states on a path from 0 to a final state, renumbered topologically (0 first),
    as a :class:`CompactLattice` (final weights without strings)."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for s, d, *_ in arcs:
        succ[s].append(d)
        pred[d].append(s)

    def reach(starts, nbrs):
        seen = set(starts)
        stack = list(starts)
        while stack:
            for v in nbrs[stack.pop()]:
                if v not in seen:
                    seen.add(v)
                    stack.append(v)
        return seen

    alive = reach([0], succ) & reach(list(finals), pred) if n else set()
    if 0 not in alive:
        none = np.zeros(0, dtype=np.int64)
        return CompactLattice(0, none, none, none, none * 0.0, none * 0.0, [])
    arcs = [a for a in arcs if a[0] in alive and a[1] in alive]
    indeg = dict.fromkeys(alive, 0)
    for a in arcs:
        indeg[a[1]] += 1
    order, ready = [], [0]
    while ready:
        u = ready.pop()
        order.append(u)
        for v in succ[u]:
            if v in indeg:
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
    new = {s: i for i, s in enumerate(order)}
    arcs.sort(key=lambda a: (new[a[0]], new[a[1]]))
    return CompactLattice(
        num_states=len(order),
        src=np.array([new[a[0]] for a in arcs], dtype=np.int64),
        dst=np.array([new[a[1]] for a in arcs], dtype=np.int64),
        word=np.array([a[2] for a in arcs], dtype=np.int64),
        graph=np.array([a[3] for a in arcs], dtype=np.float64),
        acoustic=np.array([a[4] for a in arcs], dtype=np.float64),
        strings=[a[5] for a in arcs],
        final={new[s]: (g, a, ()) for s, (g, a) in finals.items() if s in new},
    )
