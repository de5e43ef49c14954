"""Running a network: Kaldi's semantics of an nnet3 network on one utterance, and its
left and right context.

Mirrors what kaldi-asr/kaldi's compiler and computation do for a simple network
(``src/nnet3/nnet-compile.cc``, ``nnet-compute.cc``; contexts as
``ComputeSimpleNnetContext`` in ``nnet-utils.cc``), in float64 with numpy, for checking an
export (the tests; vosk runs Kaldi's own). The components' ``Propagate``:
:data:`.components.COMPONENTS`; an output-delay's effect on the contexts:
docs/export-and-vosk.md ("The nnet3 writer").
"""

from __future__ import annotations

import numpy as np

from paravg.errors import ModelFileError
from paravg.export.nnet3.components import apply_component
from paravg.export.nnet3.descriptors import tree_edges
from paravg.export.nnet3.network import Graph, Nnet3

INF = 1 << 40  # a range without end (a constant input)


class _Evaluator:
    """Kaldi's semantics of a network on one utterance (float64): a node is computable
    at t where every input its descriptor needs is (``IfDefined`` parts needed by none:
    zero where not computable); the nodes of a recurrence (a cycle through negative
    offsets) are computed in blocks of as many frames as the shortest delay, in time
    order, so each block reads only earlier blocks (and zeros before the first)."""

    def __init__(self, nnet: Nnet3, inputs: dict[str, np.ndarray], constants: dict) -> None:
        self.nnet, self.g = nnet, Graph.of(nnet)
        self.ranges: dict[str, tuple[int, int]] = {}
        self.values: dict[str, np.ndarray] = {}
        self.done: dict[str, int] = {}  # computed up to (exclusive)
        for name in self.g.inputs:
            if name in inputs:
                self.values[name] = np.asarray(inputs[name], np.float64)
                self.ranges[name] = (0, self.values[name].shape[0])
                self.done[name] = self.ranges[name][1]
            elif name in constants:
                self.values[name] = np.asarray(constants[name], np.float64)[None, :]
                self.ranges[name] = (-INF, INF)
                self.done[name] = INF
            else:
                self.ranges[name] = (0, 0)
                self.values[name] = np.zeros((0, self.g.inputs[name]))
                self.done[name] = 0
        self._compute_ranges()

    # -------------------------------------------------------------- computability
    def _tree_range(self, t) -> tuple[int, int]:
        kind = t[0]
        if kind == "node":
            return self.ranges[self.g.resolve(t[1])[0]]
        if kind == "offset":
            lo, hi = self._tree_range(t[1])
            if lo <= -INF:
                return lo, hi
            return lo - t[2], hi - t[2]
        if kind == "replace_t":
            lo, hi = self._tree_range(t[1])
            return (-INF, INF) if lo <= t[2] < hi else (0, 0)
        if kind == "ifdefined":
            return -INF, INF
        if kind == "scale":
            return self._tree_range(t[2])
        ranges = [self._tree_range(a) for a in t[1]]
        return max(r[0] for r in ranges), min(r[1] for r in ranges)

    def _component_range(self, name: str) -> tuple[int, int]:
        comp_name, tree = self.g.components[name]
        lo, hi = self._tree_range(tree)
        offsets = self.nnet.component(comp_name).time_offsets
        if offsets is not None:
            lo, hi = lo - min(offsets), hi - max(offsets)
        return lo, max(lo, hi)

    def _compute_ranges(self) -> None:
        """The greatest fixed point of 'computable where the needed inputs are' (ranges
        only shrink from everything)."""
        for name in self.g.components:
            self.ranges[name] = (-INF, INF)
        for _ in range(len(self.g.components) + 2):
            changed = False
            for name in self.g.components:
                r = self._component_range(name)
                if r != self.ranges[name]:
                    self.ranges[name], changed = r, True
            if not changed:
                return
        raise ModelFileError(
            "the network's computable frames do not settle (a cycle without IfDefined)"
        )

    # -------------------------------------------------------------- values
    def node(self, name: str, lo: int, hi: int, optional: bool) -> np.ndarray:
        base, c0, c1 = self.g.resolve(name)
        vals = self.values[base]
        c1 = vals.shape[1] if c1 is None else c1
        blo, bhi = self.ranges[base]
        if blo <= -INF:
            return np.broadcast_to(vals[:, c0:c1], (hi - lo, c1 - c0))
        s, e = max(lo, blo), min(hi, bhi)
        if (s > lo or e < hi) and not optional:
            raise ModelFileError(f"node {name!r} is needed at frames {lo}..{hi - 1}, "
                                 f"computable at {blo}..{bhi - 1}")  # fmt: skip
        if s >= e:
            return np.zeros((hi - lo, c1 - c0))
        if e > self.done[base]:
            raise ModelFileError(f"node {name!r} read at frame {e - 1} before it is computed")
        if s == lo and e == hi:
            return vals[s - blo : e - blo, c0:c1]
        out = np.zeros((hi - lo, c1 - c0))
        out[s - lo : e - lo] = vals[s - blo : e - blo, c0:c1]
        return out

    def tree(self, t, lo: int, hi: int, optional: bool = False) -> np.ndarray:
        kind = t[0]
        if kind == "node":
            return self.node(t[1], lo, hi, optional)
        if kind == "offset":
            return self.tree(t[1], lo + t[2], hi + t[2], optional)
        if kind == "replace_t":
            row = self.tree(t[1], t[2], t[2] + 1, optional)
            return np.broadcast_to(row, (hi - lo, row.shape[1]))
        if kind == "ifdefined":
            return self.tree(t[1], lo, hi, True)
        if kind == "scale":
            return t[1] * self.tree(t[2], lo, hi, optional)
        parts = [self.tree(a, lo, hi, optional) for a in t[1]]
        if kind == "sum":
            return sum(parts[1:], parts[0].copy())
        return np.concatenate(parts, axis=1)

    def _apply(self, name: str, lo: int, hi: int) -> np.ndarray:
        comp_name, tree = self.g.components[name]
        comp = self.nnet.component(comp_name)
        offsets = comp.time_offsets
        if offsets is None:
            return apply_component(comp, self.tree(tree, lo, hi))
        return apply_component(comp, [self.tree(tree, lo + o, hi + o) for o in offsets])

    def _sccs(self) -> list[list[str]]:
        """Strongly connected components of the component nodes (edges: node → the
        component nodes it reads), dependencies first (Tarjan)."""
        names = list(self.g.components)
        deps = {n: sorted({self.g.resolve(m)[0] for m, _o, _opt in
                           tree_edges(self.g.components[n][1])} & set(names))
                for n in names}  # fmt: skip
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        out: list[list[str]] = []

        def visit(v: str) -> None:
            index[v] = low[v] = len(index)
            stack.append(v)
            on_stack.add(v)
            for w in deps[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                out.append(sorted(scc, key=names.index))

        for v in names:
            if v not in index:
                visit(v)
        return out

    def run(self) -> None:
        for scc in self._sccs():
            inner = set(scc)
            edges = [(n, self.g.resolve(m)[0], o) for n in scc
                     for m, o, _opt in tree_edges(self.g.components[n][1])]  # fmt: skip
            edges = [(n, m, o) for n, m, o in edges if m in inner]
            if not edges:  # not a recurrence: all frames at once
                (name,) = scc
                lo, hi = self.ranges[name]
                if lo <= -INF or hi >= INF:
                    raise ModelFileError(f"{name} reads no frame of the input")
                dim = self.nnet.component(self.g.components[name][0]).output_dim
                self.values[name] = self._apply(name, lo, hi) if hi > lo else np.zeros((0, dim))
                self.done[name] = hi
                continue
            self._run_recurrence(scc, edges)

    def _run_recurrence(self, scc: list[str], edges) -> None:
        for n, m, o in edges:
            if o is None or o > 0:
                raise ModelFileError(
                    f"{n} reads {m} of its own recurrence at a later or fixed time"
                )
            comp = self.nnet.component(self.g.components[n][0])
            if comp.time_offsets is not None:
                raise ModelFileError(f"{n}: a {comp.kind} inside a recurrence")
        lags = [-o for _n, _m, o in edges if o < 0]
        if not lags:
            raise ModelFileError(f"the nodes {scc} read each other at the same time")
        block = min(lags)
        # within a block: each node after the ones it reads at offset 0
        order: list[str] = []
        same = {n: {m for k, m, o in edges if k == n and o == 0 and m != n} for n in scc}
        while len(order) < len(scc):
            ready = [n for n in scc if n not in order and same[n] <= set(order)]
            if not ready:
                raise ModelFileError(f"the nodes {scc} read each other at the same time")
            order.append(ready[0])
        for n in scc:
            lo, hi = self.ranges[n]
            dim = self.nnet.component(self.g.components[n][0]).output_dim
            self.values[n] = np.zeros((max(0, hi - lo), dim))
            self.done[n] = lo
        start = min(self.ranges[n][0] for n in scc)
        end = max(self.ranges[n][1] for n in scc)
        for b in range(start, end, block):
            for n in order:
                lo, hi = self.ranges[n]
                s, e = max(b, lo), min(b + block, hi)
                if s < e:
                    self.values[n][s - lo : e - lo] = self._apply(n, s, e)
                    self.done[n] = e


def nnet_context(nnet: Nnet3, window: int = 400) -> tuple[int, int]:
    """The network's (left, right) context as Kaldi's ``ComputeSimpleNnetContext``
    (``src/nnet3/nnet-utils.cc``) finds it: with input frames 0 .. window - 1 and outputs
    asked for at the same frames, left = the first computable output frame, right = the
    frames after the last one (IfDefined recurrences need none; an output-delay k takes k
    from the left and adds k on the right). The frames' values are not computed."""
    g = Graph.of(nnet)
    dims = g.inputs
    inputs = {"input": np.zeros((window, dims["input"]))}
    constants = {name: np.zeros(dim) for name, dim in dims.items() if name != "input"}
    ev = _Evaluator(nnet, inputs, constants)
    out = g.outputs.get("output")
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    lo, hi = ev._tree_range(out)
    lo, hi = max(lo, 0), min(hi, window)
    if hi <= lo:
        raise ModelFileError(f"no output frame is computable from {window} input frames")
    return lo, window - hi


def compute(nnet: Nnet3, feats: np.ndarray, ivector: np.ndarray | None = None) -> np.ndarray:
    """Run the network (float64) on one utterance: ``feats`` (T, F) at t = 0..T-1 and one
    i-vector (``ReplaceIndex(ivector, t, 0)``: the same for every frame). Returns the node
    ``output`` on every frame where Kaldi can compute it from these frames (T - left -
    right rows, Kaldi's contexts; an output-delay: docs/export-and-vosk.md). Batch-norm
    components run in test mode (from their stored statistics); recurrences (``IfDefined``
    over negative offsets) start from zero at the first frame their input is computable."""
    constants = {} if ivector is None else {"ivector": ivector}
    ev = _Evaluator(nnet, {"input": feats}, constants)
    ev.run()
    out = ev.g.outputs.get("output")
    if out is None:
        raise ModelFileError("the network has no output-node named 'output'")
    lo, hi = ev._tree_range(out)
    # the frames of the input only (Kaldi's contexts: outputs asked for at input frames)
    lo, hi = max(lo, 0), min(hi, len(feats))
    return np.array(ev.tree(out, lo, max(lo, hi)))
