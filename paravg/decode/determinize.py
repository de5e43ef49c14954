"""Kaldi's pruned lattice determinisation: a raw state-level lattice to a CompactLattice.

Mirrors ``src/lat/determinize-lattice-pruned.{h,cc}`` (``LatticeDeterminizerPruned``,
``DeterminizeLatticePruned``, ``DeterminizeLatticePhonePruned``) and ``PruneLattice`` of
``src/lat/lattice-functions.cc``, on paravg's :class:`paravg.decode.lattice.Lattice`.

**Semiring.** A ``LatticeWeight`` is a pair (graph cost g, acoustic cost a); Times adds
both, Plus keeps the better one (``Compare`` in ``src/fstext/lattice-weight.h``): the lower
g + a, ties to the lower g. As Kaldi's decoder does (``DecodeUtteranceLatticeFaster``:
scale by ``acoustic_scale``, determinise, scale back), the costs compared here are
g + s·a with s the acoustic scale, while the arcs keep a unscaled. A
``CompactLatticeWeight`` adds a string of transition-ids: Times concatenates, Plus keeps
the better weight, ties to the shorter string, then the lexicographically greater one.

**Determinisation** (the lattice inverted: words are the input labels determinised on,
transition-ids the output strings). A determinised state is a subset of raw states, each
with a residual weight and string (an *element*). From a subset: its epsilon closure
(``EpsilonClosure``: follow word-less arcs, keeping per raw state the best (weight,
string)), reduced to the states that are final or have a word arc (``ConvertToMinimal``);
for each word w, the elements reached over w-arcs (the best per raw state,
``MakeSubsetUnique``) are *normalised* (``NormalizeSubset``): the best weight W and the
longest common string prefix P go on the output arc, the elements keep weight / W and the
rest of their string. The output state's final weight is the best element weight × the
raw final weight, with the element's string. Hence each word sequence is accepted once,
with the best (g, a) of the raw lattice's paths that spell it and that path's
transition-ids.

**Pruning** (``cutoff`` = best path cost + beam, with backward costs β of the raw
lattice and forward costs α of the output states): a transition out of a determinised
state is expanded, best first (a priority queue on α + min over its elements of weight +
β), only when that priority is within the cutoff; a final weight only when α + its cost
is. Paths of the raw lattice within the beam all survive. ``max_mem`` (bytes, Kaldi's
approximate count: 24 per arc and element, 16 per string position) stops it early, as
Kaldi does, with the beam it reached; the driver (``DeterminizeLatticePruned``) then
prunes the raw lattice to a narrower beam and retries when that effective beam was below
``retry_cutoff`` · beam.

**Phone-pruned** (``DeterminizeLatticePhonePruned``, Kaldi's default in the decoder):
first pass, a phone label is inserted on every arc whose transition-id leaves the first
HMM state of a phone (``DeterminizeLatticeInsertPhones``; not on arcs leaving the start
state), the lattice is determinised on (word, phone) labels, the phone labels are then
removed; second pass, the result is determinised on words. The first pass merges the
alignments of each phone sequence early, so that the word pass's epsilon closures stay
small. Both passes use the same beam.

The output is epsilon-free, every arc labelled by a word > 0: as in Kaldi, the start
state's subset is not normalised, so no epsilon arc from a super-initial state is needed.
Determinised states whose subsets lead nowhere (Kaldi's "empty subset", Zero-weight
arcs) get no arc; ``Connect`` and a topological renumbering end it.

**Cost** (profiled on the demo's dev lattices, ~150-290 links a frame at lattice beam 8):
the phone pass takes ~90 % (tens of thousands of determinised states an utterance, each
with its epsilon closure and its transitions' subsets), the word pass the rest. On the
demo's whole test set (``bench_decode.py --determinize``) 0.84 CPU s per second of audio
at beam 6, 0.28 at beam 5, 0.09 at beam 4 (about 2 at Kaldi's 8), against the word
search's 0.12: ``decode.determinize_beam`` is 5 by default, where it costs less than the
raw lattices' scoring and CTM it replaces (docs/decoding.md). The inner loops are per
(element, arc) dictionary and tuple work that a compiled port of this class (Kaldi's C++
does the same operations on flat arrays and a string trie) would run one to two orders
of magnitude faster.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from paravg.decode.lattice import Lattice

DELTA = 1.0 / 1024  # Kaldi's kDelta: weights equal within it make one subset
ARC_BYTES = 24  # sizeof(TempArc) / sizeof(Element) in Kaldi's accounting
STRING_BYTES = 16  # a LatticeStringRepository entry


@dataclass
class CompactLattice:
    """Kaldi's ``CompactLattice``: an acceptor over words (state 0 the start) whose arcs
    and final weights carry (graph, acoustic, transition-ids). ``final`` maps a state to
    its (graph, acoustic, string). Acoustic costs unscaled."""

    num_states: int
    src: np.ndarray
    dst: np.ndarray
    word: np.ndarray
    graph: np.ndarray
    acoustic: np.ndarray
    strings: list[tuple[int, ...]]
    final: dict[int, tuple[float, float, tuple[int, ...]]] = field(default_factory=dict)
    # the beam reached (the requested one unless max_mem stopped it early)
    effective_beam: float = math.inf

    @property
    def num_arcs(self) -> int:
        return len(self.src)

    def scale_acoustic(self, scale: float) -> None:
        """Multiply every acoustic cost, arcs' and final weights' (``lattice-scale
        --acoustic-scale``)."""
        self.acoustic = self.acoustic * scale
        self.final = {s: (g, a * scale, t) for s, (g, a, t) in self.final.items()}

    def add_word_penalty(self, penalty: float) -> None:
        """Add ``penalty`` to the graph cost of every arc with a word
        (``lattice-add-penalty --word-ins-penalty``)."""
        self.graph = self.graph + penalty * (self.word > 0)

    def topological_order(self) -> list[int]:
        """The states in an order where every arc goes forward (state 0 first)."""
        succ: list[list[int]] = [[] for _ in range(self.num_states)]
        indeg = [0] * self.num_states
        for s, d in zip(self.src.tolist(), self.dst.tolist(), strict=True):
            succ[s].append(d)
            indeg[d] += 1
        order, ready = [], [s for s in range(self.num_states) if indeg[s] == 0]
        while ready:
            s = ready.pop()
            order.append(s)
            for d in succ[s]:
                indeg[d] -= 1
                if indeg[d] == 0:
                    ready.append(d)
        return order

    def pruned(self, beam: float) -> CompactLattice:
        """``PruneLattice`` (``lattice-prune --beam``) on the costs as they are (scale
        them first): the arcs and final weights on a path within ``beam`` of the best,
        α(src) + g + a + β(dst) ≤ β(0) + beam, and the states they connect."""
        n = self.num_states
        if not n:
            return self
        order = self.topological_order()
        cost = (self.graph + self.acoustic).tolist()
        out: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        for i, (s, d) in enumerate(zip(self.src.tolist(), self.dst.tolist(), strict=True)):
            out[s].append((d, cost[i]))
        final = {s: g + a for s, (g, a, _) in self.final.items()}
        alpha = [math.inf] * n
        alpha[0] = 0.0
        for s in order:
            for d, c in out[s]:
                alpha[d] = min(alpha[d], alpha[s] + c)
        beta = [final.get(s, math.inf) for s in range(n)]
        for s in reversed(order):
            for d, c in out[s]:
                beta[s] = min(beta[s], c + beta[d])
        cutoff = beta[0] + beam
        alpha_a, beta_a = np.array(alpha), np.array(beta)
        keep = alpha_a[self.src] + np.array(cost) + beta_a[self.dst] <= cutoff
        fin = {s: f for s, f in self.final.items() if alpha[s] + final[s] <= cutoff}
        used = np.zeros(n, dtype=bool)
        used[0] = True
        used[self.src[keep]] = True
        used[self.dst[keep]] = True
        new_id = np.cumsum(used) - 1
        return CompactLattice(
            num_states=int(used.sum()),
            src=new_id[self.src[keep]],
            dst=new_id[self.dst[keep]],
            word=self.word[keep],
            graph=self.graph[keep],
            acoustic=self.acoustic[keep],
            strings=[t for t, k in zip(self.strings, keep.tolist(), strict=True) if k],
            final={int(new_id[s]): f for s, f in fin.items()},
            effective_beam=self.effective_beam,
        )

    def write_kaldi_text(self, out, key: str) -> None:
        """One entry of a Kaldi text archive of CompactLattices (``ark,t``): ``key``, then
        ``src dst word graph,acoustic,t1_t2_…`` per arc and ``state graph,acoustic,t1_…``
        per final state (``WriteCompactLattice``), then an empty line."""
        lines = [f"{key}\n"]
        for s, d, w, g, ac, tids in zip(
            self.src.tolist(),
            self.dst.tolist(),
            self.word.tolist(),
            self.graph.tolist(),
            self.acoustic.tolist(),
            self.strings,
            strict=True,
        ):
            lines.append(f"{s}\t{d}\t{w}\t{g:.6g},{ac:.6g},{'_'.join(map(str, tids))}\n")
        for s in sorted(self.final):
            g, ac, tids = self.final[s]
            lines.append(f"{s}\t{g:.6g},{ac:.6g},{'_'.join(map(str, tids))}\n")
        lines.append("\n")
        out.write("".join(lines))

    def to_lattice(self) -> Lattice:
        """The state-level :class:`Lattice` it spells (Kaldi's ``ConvertLattice``): each
        arc a chain of links, one transition-id each (one link without any for an empty
        string), its word and weight on the first; a final weight with a string or an
        acoustic cost becomes such a chain to a new final node of cost 0."""
        return Lattice.from_compact(
            self.num_states,
            self.src,
            self.dst,
            self.word,
            self.graph,
            self.acoustic,
            self.strings,
            self.final,
        )


# ---------------------------------------------------------------- PruneLattice
def prune_lattice(lattice: Lattice, beam: float, acoustic_scale: float) -> Lattice:
    """Kaldi's ``PruneLattice`` (``lattice-functions.cc``): keep the links and final
    weights on some path whose cost g + s·a is within ``beam`` of the best, α(src) +
    cost + β(dst) ≤ best + beam, and the nodes they touch (connected, renumbered)."""
    if not lattice.num_nodes:
        return lattice
    cost = lattice.graph + acoustic_scale * lattice.acoustic
    alpha = lattice.forward_costs(cost)
    beta = lattice.backward_costs(cost)
    cutoff = beta[0] + beam
    if not np.isfinite(cutoff):
        return lattice
    keep = alpha[lattice.src] + cost + beta[lattice.dst] <= cutoff
    final = np.where(alpha + lattice.final <= cutoff, lattice.final, np.inf)
    used = np.zeros(lattice.num_nodes, dtype=bool)
    used[0] = True
    used[lattice.src[keep]] = True
    used[lattice.dst[keep]] = True
    new_id = np.cumsum(used) - 1
    out = Lattice.from_links(
        lattice.frame[used],
        final[used],
        new_id[lattice.src[keep]],
        new_id[lattice.dst[keep]],
        lattice.graph[keep],
        lattice.acoustic[keep],
        lattice.tid[keep],
        lattice.word[keep],
    )
    out.reached_final, out.peak_links = lattice.reached_final, lattice.peak_links
    return out


# ---------------------------------------------------------------- the input FST
@dataclass
class _Fst:
    """An acyclic FST in topological order (state 0 the start): per state its epsilon
    arcs and labelled arcs as (label, dst, cost, g, a, string), cost = g + s·a, and its
    final (cost, g, a, string) or None."""

    eps: list[list[tuple]]
    labelled: list[list[tuple]]
    final: list[tuple | None]

    @property
    def num_states(self) -> int:
        return len(self.final)

    @classmethod
    def build(cls, num_states, arcs, final) -> _Fst:
        """From (src, label, dst, g, a, string, cost) arcs and a final list."""
        eps = [[] for _ in range(num_states)]
        lab = [[] for _ in range(num_states)]
        for s, label, d, g, a, string, cost in arcs:
            (lab[s] if label else eps[s]).append((label, d, cost, g, a, string))
        return cls(eps, lab, final)

    def backward_costs(self) -> list[float]:
        """β(s): the best cost from s to the end (``ComputeBackwardWeight``)."""
        beta = [math.inf] * self.num_states
        for s in range(self.num_states - 1, -1, -1):
            best = self.final[s][0] if self.final[s] is not None else math.inf
            for arcs in (self.eps[s], self.labelled[s]):
                for _, d, cost, *_ in arcs:
                    if cost + beta[d] < best:
                        best = cost + beta[d]
            beta[s] = best
        return beta


def _better(x: tuple, y: tuple) -> bool:
    """Whether element weight ``x`` = (cost, g, a, string) is better than ``y`` in the
    CompactLatticeWeight order (``Compare`` of ``lattice-weight.h``)."""
    if x[0] != y[0]:
        return x[0] < y[0]
    if x[1] != y[1]:
        return x[1] < y[1]
    if len(x[3]) != len(y[3]):
        return len(x[3]) < len(y[3])
    return x[3] > y[3]


def _topological(num_states: int, arcs: list[tuple], final: dict) -> tuple[int, list, dict]:
    """Renumber the states of ``arcs`` ((src, label, dst, …)) in topological order
    (``TopSort``; state 0 stays first), keeping only those reachable from 0."""
    succ = [[] for _ in range(num_states)]
    indeg = [0] * num_states
    for arc in arcs:
        succ[arc[0]].append(arc[2])
    seen = [False] * num_states
    seen[0] = True
    stack = [0]
    while stack:
        s = stack.pop()
        for d in succ[s]:
            if not seen[d]:
                seen[d] = True
                stack.append(d)
    for arc in arcs:
        if seen[arc[0]]:
            indeg[arc[2]] += 1
    order, ready = [], [0]
    while ready:
        s = ready.pop()
        order.append(s)
        for d in succ[s]:
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
    new = {s: i for i, s in enumerate(order)}
    out = [(new[a[0]], a[1], new[a[2]], *a[3:]) for a in arcs if a[0] in new]
    return len(order), out, {new[s]: f for s, f in final.items() if s in new}


# ---------------------------------------------------------------- the determiniser
class LatticeDeterminizerPruned:
    """Kaldi's ``LatticeDeterminizerPruned`` on a :class:`_Fst` (see the module doc)."""

    def __init__(self, fst: _Fst, beam: float, delta: float = DELTA, max_mem: int = 50_000_000):
        self.fst = fst
        self.beam = beam
        self.delta = delta
        self.max_mem = max_mem
        self.beta = fst.backward_costs()
        self.cutoff = self.beta[0] + beam if fst.num_states else math.inf
        self.keep = [
            fst.final[s] is not None or bool(fst.labelled[s]) for s in range(fst.num_states)
        ]
        # per output state: minimal subset, forward cost, arcs (label, dst, cost, g, a, str)
        self.subsets: list[list[tuple]] = []
        self.forward: list[float] = []
        self.arcs: list[list[tuple]] = []
        self.finals: dict[int, tuple] = {}
        self.minimal_hash: dict[tuple, list] = {}
        self.initial_hash: dict[tuple, list] = {}
        self.queue: list = []
        self.counter = 0
        self.num_arcs = 0
        self.num_elems = 0
        self.string_len = 0

    # -- subsets
    def epsilon_closure(self, subset: dict[int, tuple]) -> dict[int, tuple]:
        """``EpsilonClosure``: follow epsilon arcs, best (weight, string) per state; the
        states are visited in increasing (topological) order, so each once."""
        heap = list(subset)
        heapq.heapify(heap)
        eps = self.fst.eps
        while heap:
            s = heapq.heappop(heap)
            cost, g, a, string = subset[s]
            for _, d, ac, ag, aa, astr in eps[s]:
                new = (cost + ac, g + ag, a + aa, string + astr if astr else string)
                old = subset.get(d)
                if old is None:
                    subset[d] = new
                    heapq.heappush(heap, d)
                elif new[0] < old[0] or (new[0] == old[0] and _better(new, old)):
                    subset[d] = new
        return subset

    def _normalize(self, elems: list[tuple]) -> tuple[tuple, tuple]:
        """``NormalizeSubset`` in place on (state, cost, g, a, string) elements: the best
        weight and the common string prefix, divided out of each; returns both."""
        best = elems[0][1:]
        prefix = elems[0][4]
        for e in elems:
            if e[1] < best[0] or (e[1] == best[0] and _better(e[1:], best)):
                best = e[1:]
            if prefix:
                s = e[4]
                if s[: len(prefix)] != prefix:
                    i, n = 0, min(len(prefix), len(s))
                    while i < n and prefix[i] == s[i]:
                        i += 1
                    prefix = prefix[:i]
        k = len(prefix)
        c0, g0, a0 = best[0], best[1], best[2]
        if k:
            elems[:] = [(s, c - c0, g - g0, a - a0, string[k:]) for s, c, g, a, string in elems]
        elif c0 or g0 or a0:
            elems[:] = [(s, c - c0, g - g0, a - a0, string) for s, c, g, a, string in elems]
        return best[:3], prefix

    def _lookup(self, table: dict, elems: list[tuple]):
        """The entry of ``table`` whose subset has the states and strings of ``elems``
        and weights within ``delta`` (``SubsetEqual``), or None; and the key."""
        key = tuple((e[0], e[4]) for e in elems)
        for weights, value in table.get(key, ()):
            if all(
                abs(g - w[0]) <= self.delta and abs(c - g - (w[1] - w[0])) <= self.delta
                for (_, c, g, _a, _), w in zip(elems, weights, strict=True)
            ):
                return value, key
        return None, key

    def _add_state(self, minimal: list[tuple], forward: float, key=None) -> int:
        """A new output state (``MinimalToStateId`` when not found): its final weight
        and its transitions' tasks."""
        sid = len(self.subsets)
        self.subsets.append(minimal)
        self.forward.append(forward)
        self.arcs.append([])
        if key is not None:
            weights = [(e[2], e[1]) for e in minimal]
            self.minimal_hash.setdefault(key, []).append((weights, sid))
        self.num_elems += len(minimal)
        self._process_final(sid)
        self._process_transitions(sid)
        return sid

    def _process_final(self, sid: int) -> None:
        """``ProcessFinal``: the best element × raw final weight, kept within the cutoff."""
        best = None
        final = self.fst.final
        for s, c, g, a, string in self.subsets[sid]:
            f = final[s]
            if f is not None:
                w = (c + f[0], g + f[1], a + f[2], string + f[3])
                if best is None or _better(w, best):
                    best = w
        if best is not None and best[0] + self.forward[sid] <= self.cutoff:
            self.finals[sid] = best
            self.num_arcs += 1

    def _process_transitions(self, sid: int) -> None:
        """``ProcessTransitions``: per label, the elements its arcs reach (best per raw
        state), queued with priority α + min(weight + β) when within the cutoff."""
        by_label: dict[int, dict[int, tuple]] = {}
        best: dict[int, float] = {}  # per label, min over its elements of weight + β
        labelled = self.fst.labelled
        beta = self.beta
        for s, c, g, a, string in self.subsets[sid]:
            for label, d, ac, ag, aa, astr in labelled[s]:
                new = (c + ac, g + ag, a + aa, string + astr if astr else string)
                group = by_label.get(label)
                if group is None:
                    by_label[label] = {d: new}
                    best[label] = new[0] + beta[d]
                    continue
                old = group.get(d)
                if old is None or new[0] < old[0] or (new[0] == old[0] and _better(new, old)):
                    group[d] = new
                    if new[0] + beta[d] < best[label]:
                        best[label] = new[0] + beta[d]
        fwd = self.forward[sid]
        cutoff = self.cutoff
        for label, group in by_label.items():
            priority = fwd + best[label]
            if priority <= cutoff:
                elems = [(d, *group[d]) for d in sorted(group)]
                self.counter += 1
                heapq.heappush(self.queue, (priority, self.counter, sid, label, elems))

    def _initial_to_state(self, elems: list[tuple], forward: float):
        """``InitialToStateId``: the output state of a normalised subset before its
        closure, with the weight and string its normalisation after closure leaves."""
        found, key = self._lookup(self.initial_hash, elems)
        if found is not None:
            return found
        closed = self.epsilon_closure({e[0]: e[1:] for e in elems})
        minimal = [(s, *closed[s]) for s in sorted(closed) if self.keep[s]]
        if not minimal:  # a dead end (Kaldi: an "empty subset", its arc Zero and removed)
            return None
        weight, prefix = self._normalize(minimal)
        sid, mkey = self._lookup(self.minimal_hash, minimal)
        if sid is None:
            sid = self._add_state(minimal, forward + weight[0], mkey)
        value = (sid, weight, prefix)
        weights = [(e[2], e[1]) for e in elems]
        self.initial_hash.setdefault(key, []).append((weights, value))
        self.num_elems += len(elems)
        return value

    def _process_transition(self, sid: int, label: int, elems: list[tuple]) -> None:
        """``ProcessTransition``: normalise the task's subset, find its state, add the arc."""
        weight, prefix = self._normalize(elems)
        found = self._initial_to_state(elems, self.forward[sid] + weight[0])
        if found is None:
            return
        nxt, w2, p2 = found
        string = prefix + p2
        self.arcs[sid].append(
            (label, nxt, weight[0] + w2[0], weight[1] + w2[1], weight[2] + w2[2], string)
        )
        self.num_arcs += 1
        self.string_len += len(string)

    def memory(self) -> int:
        """Approximate bytes, as Kaldi's ``CheckMemoryUsage`` counts them."""
        return (self.num_arcs + self.num_elems) * ARC_BYTES + self.string_len * STRING_BYTES

    def determinize(self) -> tuple[bool, float]:
        """``Determinize``: (finished within the beam, the effective beam)."""
        if not self.fst.num_states:
            return True, self.beam
        closed = self.epsilon_closure({0: (0.0, 0.0, 0.0, ())})
        minimal = [(s, *closed[s]) for s in sorted(closed) if self.keep[s]]
        self._add_state(minimal, 0.0, tuple((e[0], e[4]) for e in minimal))
        while self.queue:
            if len(self.subsets) % 10 == 0 and self.max_mem > 0 and self.memory() > self.max_mem:
                return False, self.queue[0][0] - self.beta[0]
            _, _, sid, label, elems = heapq.heappop(self.queue)
            self._process_transition(sid, label, elems)
        return True, self.beam

    def output(self) -> tuple[int, list[tuple], dict]:
        """(number of states, arcs (src, label, dst, g, a, string, cost), finals)."""
        arcs = [
            (s, label, d, g, a, string, c)
            for s, out in enumerate(self.arcs)
            for label, d, c, g, a, string in out
        ]
        finals = {s: (g, a, string, c) for s, (c, g, a, string) in self.finals.items()}
        return len(self.subsets), arcs, finals


def _fst_from(num_states: int, arcs: list[tuple], finals: dict) -> _Fst:
    final: list[tuple | None] = [None] * num_states
    for s, (g, a, string, c) in finals.items():
        final[s] = (c, g, a, string)
    return _Fst.build(num_states, arcs, final)


def determinize_lattice_pruned_fst(
    fst: _Fst, beam: float, max_mem: int = 50_000_000, retry_cutoff: float = 0.5
) -> tuple[int, list[tuple], dict, float]:
    """Kaldi's ``DeterminizeLatticePruned`` driver: determinise; when ``max_mem`` stopped
    it at an effective beam below ``retry_cutoff`` · beam, prune the input to
    beam · sqrt(effective / beam) (at least half the beam) and retry, at most 10 times."""
    for attempt in range(10):
        det = LatticeDeterminizerPruned(fst, beam, max_mem=max_mem)
        ok, effective = det.determinize()
        if ok or effective >= beam * retry_cutoff or math.isinf(beam) or attempt == 9:
            return (*det.output(), effective)
        beam = max(beam * math.sqrt(max(effective, 0.0) / beam), 0.5 * beam)
        fst = _prune_fst(fst, beam)
    raise AssertionError("unreachable")


def _prune_fst(fst: _Fst, beam: float) -> _Fst:
    """``PruneLattice`` on a :class:`_Fst`."""
    n = fst.num_states
    beta = fst.backward_costs()
    alpha = [math.inf] * n
    alpha[0] = 0.0
    for s in range(n):
        for arcs in (fst.eps[s], fst.labelled[s]):
            for _, d, c, *_ in arcs:
                alpha[d] = min(alpha[d], alpha[s] + c)
    cutoff = beta[0] + beam
    arcs = [
        (s, label, d, g, a, string, c)
        for s in range(n)
        for arcs_ in (fst.eps[s], fst.labelled[s])
        for label, d, c, g, a, string in arcs_
        if alpha[s] + c + beta[d] <= cutoff
    ]
    final = [
        f if f is not None and alpha[s] + f[0] <= cutoff else None for s, f in enumerate(fst.final)
    ]
    return _Fst.build(n, arcs, final)


# ---------------------------------------------------------------- on paravg's lattices
def _raw_arcs(lattice: Lattice, acoustic_scale: float, phone_label=None) -> tuple[int, list, dict]:
    """The inverted raw lattice as (src, label, dst, g, a, string, cost) arcs: label the
    word; with ``phone_label`` (tid -> phone label or 0), ``DeterminizeLatticeInsertPhones``:
    a phone-starting arc not leaving the start gets the phone label when it has no word,
    else a new state after it with a phone-labelled arc of weight One."""
    n = lattice.num_nodes
    arcs = []
    for s, d, w, g, a, t in zip(
        lattice.src.tolist(),
        lattice.dst.tolist(),
        lattice.word.tolist(),
        lattice.graph.tolist(),
        lattice.acoustic.tolist(),
        lattice.tid.tolist(),
        strict=True,
    ):
        string = (t,) if t else ()
        cost = g + acoustic_scale * a
        phone = phone_label[t] if (phone_label is not None and t and s != 0) else 0
        if not phone:
            arcs.append((s, w, d, g, a, string, cost))
        elif not w:
            arcs.append((s, phone, d, g, a, string, cost))
        else:
            arcs.append((s, w, n, g, a, string, cost))
            arcs.append((n, phone, d, 0.0, 0.0, (), 0.0))
            n += 1
    finals = {
        s: (float(f), 0.0, (), float(f))
        for s, f in enumerate(lattice.final.tolist())
        if math.isfinite(f)
    }
    return n, arcs, finals


def determinize_lattice_phone_pruned(
    lattice: Lattice,
    beam: float,
    acoustic_scale: float,
    tid_to_phone: Sequence[int] | np.ndarray | None = None,
    tid_starts_phone: Sequence[bool] | np.ndarray | None = None,
    max_mem: int = 50_000_000,
    prune_first: bool = True,
) -> CompactLattice:
    """Determinise a raw lattice as Kaldi's decoder does
    (``DeterminizeLatticePhonePrunedWrapper``): ``PruneLattice`` to ``beam`` first (when
    ``prune_first``), then with the transition model's maps the phone pass and the word
    pass (``DeterminizeLatticePhonePruned``), without them the word pass alone
    (``DeterminizeLatticePruned``), at cost g + ``acoustic_scale`` · a; unscaled
    acoustic costs out, as in."""
    if not lattice.num_nodes:  # a search that found nothing
        none = np.zeros(0, dtype=np.int64)
        return CompactLattice(0, none, none, none, none * 0.0, none * 0.0, [])
    if prune_first:
        lattice = prune_lattice(lattice, beam, acoustic_scale)
    effective = beam
    phone_label = None
    if tid_to_phone is not None and tid_starts_phone is not None:
        tid_to_phone = np.asarray(tid_to_phone)
        phone_label = np.where(np.asarray(tid_starts_phone, dtype=bool), -tid_to_phone, 0)
        phone_label = phone_label.tolist()
    n, arcs, finals = _raw_arcs(lattice, acoustic_scale, phone_label)
    if phone_label is not None:
        n, arcs, finals = _topological(n, arcs, finals)
        n, arcs, finals, effective = determinize_lattice_pruned_fst(
            _fst_from(n, arcs, finals), beam, max_mem
        )
        # DeterminizeLatticeDeletePhones: phone labels become epsilons
        arcs = [(s, label if label > 0 else 0, *rest) for s, label, *rest in arcs]
        n, arcs, finals = _topological(n, arcs, finals)
    n, arcs, finals, eff2 = determinize_lattice_pruned_fst(
        _fst_from(n, arcs, finals), beam, max_mem
    )
    effective = min(effective, eff2)
    n, arcs, finals = _connect(n, arcs, finals)
    return CompactLattice(
        num_states=n,
        src=np.array([a[0] for a in arcs], dtype=np.int64),
        dst=np.array([a[2] for a in arcs], dtype=np.int64),
        word=np.array([a[1] for a in arcs], dtype=np.int64),
        graph=np.array([a[3] for a in arcs], dtype=np.float64),
        acoustic=np.array([a[4] for a in arcs], dtype=np.float64),
        strings=[a[5] for a in arcs],
        final={s: f[:3] for s, f in finals.items()},
        effective_beam=effective,
    )


def _connect(n: int, arcs: list[tuple], finals: dict) -> tuple[int, list, dict]:
    """``Connect``: keep the states on a path from the start to a final state, renumbered
    in topological order."""
    pred = [[] for _ in range(n)]
    for a in arcs:
        pred[a[2]].append(a[0])
    alive = [False] * n
    stack = [s for s in finals]
    for s in stack:
        alive[s] = True
    while stack:
        s = stack.pop()
        for p in pred[s]:
            if not alive[p]:
                alive[p] = True
                stack.append(p)
    if not alive[0]:
        return 0, [], {}
    arcs = [a for a in arcs if alive[a[0]] and alive[a[2]]]
    return _topological(n, arcs, finals)
