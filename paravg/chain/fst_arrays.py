"""kaldifst FSTs as arc arrays and back (through OpenFst's text form).

The chain code keeps graphs as numpy/torch arrays (one row per arc: source, destination,
input label, output label, weight = -log probability) and uses kaldifst only for the FST
algorithms (composition, epsilon removal, determinisation, minimisation), as Kaldi's
``chain-den-graph.cc`` walks an ``StdVectorFst`` with ``ArcIterator`` to build its tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FstArrays:
    """An FST's arcs and final weights (tropical: -log prob, ``inf`` = not final)."""

    num_states: int
    start: int
    src: np.ndarray  # int64 [A]
    dst: np.ndarray  # int64 [A]
    ilabel: np.ndarray  # int64 [A]
    olabel: np.ndarray  # int64 [A]
    weight: np.ndarray  # float64 [A]
    final: np.ndarray  # float64 [num_states]

    @property
    def num_arcs(self) -> int:
        return len(self.src)


def fst_to_arrays(fst) -> FstArrays:
    """Arc arrays of a kaldifst ``StdVectorFst`` (arcs in state order, as stored)."""
    num_states = fst.num_states
    rows, finals = [], np.full(num_states, np.inf)
    for line in fst.to_str(show_weight_one=True).splitlines():
        f = line.split()
        if len(f) >= 4:
            w = float(f[4]) if len(f) > 4 else 0.0
            rows.append((int(f[0]), int(f[1]), int(f[2]), int(f[3]), w))
        elif f:
            finals[int(f[0])] = float(f[1]) if len(f) > 1 else 0.0
    arr = np.array(rows, dtype=np.float64).reshape(-1, 5)
    return FstArrays(
        num_states=num_states,
        start=int(fst.start) if num_states else -1,
        src=arr[:, 0].astype(np.int64),
        dst=arr[:, 1].astype(np.int64),
        ilabel=arr[:, 2].astype(np.int64),
        olabel=arr[:, 3].astype(np.int64),
        weight=arr[:, 4].copy(),
        final=finals,
    )


def arrays_to_fst(a: FstArrays):
    """A kaldifst ``StdVectorFst`` with the same state numbering, start, arcs and finals."""
    import kaldifst

    lines = []
    order = [a.start] + [s for s in range(a.num_states) if s != a.start]
    by_src: dict[int, list[int]] = {}
    for i, s in enumerate(a.src.tolist()):
        by_src.setdefault(s, []).append(i)
    for s in order:
        for i in by_src.get(s, []):
            lines.append(f"{s} {a.dst[i]} {a.ilabel[i]} {a.olabel[i]} {float(a.weight[i])!r}")
        if np.isfinite(a.final[s]):
            lines.append(f"{s} {float(a.final[s])!r}")
    if not lines:  # a start state with nothing: one non-final state
        lines.append(f"{a.start} Infinity")
    fst = kaldifst.compile("\n".join(lines) + "\n", acceptor=False, keep_state_numbering=True)
    while fst.num_states < a.num_states:  # states with no arcs, not final, not listed
        fst.add_state()
    return fst


def project_input(fst):
    """``fst::Project(PROJECT_INPUT)``: output labels := input labels."""
    a = fst_to_arrays(fst)
    return arrays_to_fst(
        FstArrays(a.num_states, a.start, a.src, a.dst, a.ilabel, a.ilabel.copy(), a.weight, a.final)
    )


def relabel(fst, table: np.ndarray):
    """Both labels ``l > 0`` replaced by ``table[l]`` (an acceptor stays one)."""
    a = fst_to_arrays(fst)
    lab = a.ilabel.copy()
    lab[lab > 0] = table[lab[lab > 0]]
    return arrays_to_fst(
        FstArrays(a.num_states, a.start, a.src, a.dst, lab, lab.copy(), a.weight, a.final)
    )
