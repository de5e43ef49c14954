"""Numerator supervision from an alignment: Kaldi's ``AlignmentToProtoSupervision``,
``ProtoSupervisionToSupervision`` and ``AddWeightToSupervisionFst``
(``src/chain/chain-supervision.{h,cc}``; ``SupervisionOptions``: ``left_tolerance`` 5,
``right_tolerance`` 5, ``frame_subsampling_factor`` 3).

1. Proto-supervision. With phones ``p_i`` lasting ``d_i`` input frames from frame ``b_i``
   (``N = Σ d_i`` frames, ``T = ⌈N / f⌉`` output frames), phone ``p_i`` is allowed on
   output frames ``t ∈ [⌈max(0, b_i - l) / f⌉, ⌈min(N, b_i + d_i + r) / f⌉)``
   (``l``, ``r`` the tolerances, ``f`` the subsampling factor); ``l + r + 1 >= f`` makes
   every output frame allow some phone. The phone sequence itself is a linear acceptor.
2. Supervision. The linear acceptor through context and ``H`` with
   ``transition_scale = 0`` and self-loops at scale 0 with ``reorder`` (the same
   construction as the den FST, :func:`paravg.chain.den_fst.transition_id_fst`: no
   weights), epsilons removed, then intersected with time (``TimeEnforcerFst``): state
   ``(s, t)``, an arc with transition-id ``i`` taken at frame ``t`` only if
   ``phone(i)`` is allowed at ``t``, relabelled pdf(``i``) + 1; states ``(s, T)`` final
   where ``s`` is. Trimmed (``Connect``).
3. ``AddWeightToSupervisionFst``: determinised and minimised, composed with the
   normalisation FST (so every path carries the den graph's probabilities), determinised
   and minimised again, states sorted breadth-first (state times increase).

The result is an acceptor over pdf-id + 1 whose paths are exactly ``T`` arcs long:
:class:`~paravg.chain.numerator.NumeratorGraph` batches such acceptors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from paravg.chain.den_fst import transition_id_fst
from paravg.chain.fst_arrays import FstArrays, arrays_to_fst, fst_to_arrays
from paravg.chain.numerator import state_times


@dataclass(frozen=True)
class SupervisionOptions:
    """Kaldi's ``SupervisionOptions`` (the tolerances are in input frames)."""

    left_tolerance: int = 5
    right_tolerance: int = 5
    frame_subsampling_factor: int = 3

    def check(self) -> None:
        if (
            self.left_tolerance < 0
            or self.right_tolerance < 0
            or self.frame_subsampling_factor < 1
            or self.left_tolerance + self.right_tolerance + 1 < self.frame_subsampling_factor
        ):
            raise ValueError(f"bad supervision options {self}")


@dataclass(frozen=True)
class ProtoSupervision:
    """The allowed phones of each output frame and the phone sequence."""

    allowed_phones: list[list[int]]
    phones: list[int]

    @property
    def frames(self) -> int:
        return len(self.allowed_phones)


def alignment_to_proto_supervision(
    phones: Sequence[int], durations: Sequence[int], opts: SupervisionOptions
) -> ProtoSupervision:
    """``AlignmentToProtoSupervision`` from phones and their durations (input frames)."""
    opts.check()
    if not phones or len(phones) != len(durations):
        raise ValueError("need as many durations as phones, at least one")
    f = opts.frame_subsampling_factor
    num_frames = int(sum(durations))
    frames_out = (num_frames + f - 1) // f
    allowed: list[set[int]] = [set() for _ in range(frames_out)]
    current = 0
    for phone, duration in zip(phones, durations, strict=True):
        if phone <= 0 or duration <= 0:
            raise ValueError(f"phone {phone} with duration {duration}: both must be > 0")
        t_start = max(0, current - opts.left_tolerance)
        t_end = min(num_frames, current + duration + opts.right_tolerance)
        for t in range((t_start + f - 1) // f, (t_end + f - 1) // f):
            allowed[t].add(int(phone))
        current += duration
    return ProtoSupervision([sorted(a) for a in allowed], [int(p) for p in phones])


def alignment_to_phone_durations(frame_phones: Sequence[int]) -> tuple[list[int], list[int]]:
    """Per-frame phone ids -> (phones, durations) of the runs (a phone repeated in the
    alignment without a boundary counts as one; per-frame transition-ids carry the
    boundaries, which ``ali-to-phones --write-lengths`` uses)."""
    phones: list[int] = []
    durations: list[int] = []
    for p in frame_phones:
        if phones and phones[-1] == p:
            durations[-1] += 1
        else:
            phones.append(int(p))
            durations.append(1)
    return phones, durations


def split_to_phones(
    alignment: Sequence[int], trans_model, reordered: bool = True
) -> tuple[list[int], list[int]]:
    """``SplitToPhones`` (``src/hmm/hmm-utils.cc``), as ``ali-to-phones --write-lengths``
    uses it: a transition-id alignment -> (phones, durations). A phone ends after a
    transition-id that leaves its HMM (``IsFinal``); with ``reordered`` (chain graphs and
    paravg's are built with ``reorder=true``) the self-loops that follow it still belong
    to it. Unlike per-frame phone ids, a phone repeated back to back stays two phones.
    Raises on an alignment that does not split cleanly (Kaldi's ``was_ok`` false)."""
    tids = [int(t) for t in alignment]
    state = list(trans_model.id2state)
    ends, i = [], 0
    while i < len(tids):
        t = tids[i]
        if trans_model.is_final(t):
            while reordered and i + 1 < len(tids) and trans_model.is_self_loop(tids[i + 1]):
                if state[tids[i + 1]] != state[t]:
                    raise ValueError(f"alignment: self-loop of another state after frame {i}")
                i += 1
            ends.append(i + 1)
        elif i + 1 == len(tids):
            raise ValueError("alignment: the last phone does not end")
        elif trans_model.transition_id_to_phone(t) != trans_model.transition_id_to_phone(
            tids[i + 1]
        ):
            raise ValueError(f"alignment: the phone changes inside an HMM at frame {i + 1}")
        i += 1
    phones, durations, start = [], [], 0
    for end in ends:
        phones.append(int(trans_model.transition_id_to_phone(tids[start])))
        durations.append(end - start)
        start = end
    return phones, durations


def _linear_acceptor(phones: Sequence[int]):
    n = len(phones)
    lab = np.asarray(phones, dtype=np.int64)
    final = np.full(n + 1, np.inf)
    final[n] = 0.0
    return arrays_to_fst(
        FstArrays(n + 1, 0, np.arange(n), np.arange(1, n + 1), lab, lab.copy(), np.zeros(n), final)
    )


def time_enforce(tid: FstArrays, allowed_phones: Sequence[Sequence[int]], trans_model) -> FstArrays:
    """``TimeEnforcerFst`` composed in: the transition-id acceptor unrolled over the
    output frames, keeping arcs whose phone is allowed at their frame; labels pdf + 1;
    only states on a path from ``(start, 0)`` to a final ``(s, T)`` are kept."""
    if np.any(tid.ilabel == 0):
        raise ValueError("transition-id FST has epsilons")
    T = len(allowed_phones)
    n_tid = trans_model.num_transition_ids
    phone_of = np.zeros(n_tid + 1, dtype=np.int64)
    pdf_of = np.zeros(n_tid + 1, dtype=np.int64)
    for i in range(1, n_tid + 1):
        phone_of[i] = trans_model.transition_id_to_phone(i)
        pdf_of[i] = trans_model.transition_id_to_pdf(i) + 1
    arc_phone = phone_of[tid.ilabel].tolist()
    out: list[list[int]] = [[] for _ in range(tid.num_states)]
    for i, s in enumerate(tid.src.tolist()):
        out[s].append(i)
    ids: dict[tuple[int, int], int] = {(tid.start, 0): 0}
    src, dst, lab = [], [], []
    frontier = [tid.start]
    for t in range(T):
        ok = set(allowed_phones[t])
        nxt = []
        for s in frontier:
            for i in out[s]:
                if arc_phone[i] not in ok:
                    continue
                d = int(tid.dst[i])
                if (d, t + 1) not in ids:
                    ids[(d, t + 1)] = len(ids)
                    nxt.append(d)
                src.append(ids[(s, t)])
                dst.append(ids[(d, t + 1)])
                lab.append(pdf_of[tid.ilabel[i]])
        frontier = nxt
    n = len(ids)
    final = np.full(n, np.inf)
    for (s, t), k in ids.items():
        if t == T and np.isfinite(tid.final[s]):
            final[k] = 0.0
    lab_a = np.asarray(lab, dtype=np.int64)
    raw = FstArrays(
        n,
        0,
        np.asarray(src, dtype=np.int64),
        np.asarray(dst, dtype=np.int64),
        lab_a,
        lab_a.copy(),
        np.zeros(len(src)),
        final,
    )
    return _trim(raw)


def _trim(a: FstArrays) -> FstArrays:
    """``Connect``: only states both reachable and co-reachable; may leave no state."""
    keep = np.zeros(a.num_states, dtype=bool)
    keep[np.isfinite(a.final)] = True
    changed = True
    while changed:  # co-reachable (the graph is acyclic and small)
        new = keep.copy()
        new[a.src[keep[a.dst]]] = True
        changed = bool((new != keep).any())
        keep = new
    reach = np.zeros(a.num_states, dtype=bool)
    reach[a.start] = True
    changed = True
    while changed:
        new = reach.copy()
        new[a.dst[reach[a.src]]] = True
        changed = bool((new != reach).any())
        reach = new
    keep &= reach
    if not keep[a.start]:
        return FstArrays(0, -1, *(np.zeros(0, dtype=np.int64),) * 4, np.zeros(0), np.zeros(0))
    new_id = np.cumsum(keep) - 1
    arcs = keep[a.src] & keep[a.dst]
    return FstArrays(
        int(keep.sum()),
        int(new_id[a.start]),
        new_id[a.src[arcs]],
        new_id[a.dst[arcs]],
        a.ilabel[arcs],
        a.olabel[arcs],
        a.weight[arcs],
        a.final[keep],
    )


def proto_to_supervision(proto: ProtoSupervision, ctx_dep, trans_model) -> FstArrays:
    """``ProtoSupervisionToSupervision`` (pdf-id + 1 labels, no weights); raises when no
    path fits (too many phones for too few frames)."""
    import kaldifst

    tid = transition_id_fst(_linear_acceptor(proto.phones), ctx_dep, trans_model, 0.0, 0.0)
    kaldifst.rmepsilon(tid)
    sup = time_enforce(fst_to_arrays(tid), proto.allowed_phones, trans_model)
    if sup.num_states == 0:
        raise ValueError(
            f"supervision is empty: {len(proto.phones)} phones in {proto.frames} output frames"
        )
    return sup


def sort_breadth_first(a: FstArrays) -> FstArrays:
    """``SortBreadthFirstSearch``: states renumbered in order of time."""
    times = state_times(a)
    order = np.lexsort((np.arange(a.num_states), times))
    new_id = np.empty(a.num_states, dtype=np.int64)
    new_id[order] = np.arange(a.num_states)
    arc_order = np.lexsort((np.arange(len(a.src)), new_id[a.src]))
    return FstArrays(
        a.num_states,
        int(new_id[a.start]),
        new_id[a.src][arc_order],
        new_id[a.dst][arc_order],
        a.ilabel[arc_order],
        a.olabel[arc_order],
        a.weight[arc_order],
        a.final[order],
    )


def _determinize_minimize(fst):
    import kaldifst

    out = kaldifst.determinize(fst)
    kaldifst.minimize(out)
    return out


def add_weight_to_supervision(normalization_fst, supervision: FstArrays) -> FstArrays:
    """``AddWeightToSupervisionFst``: determinise, minimise, compose with the
    normalisation FST, determinise, minimise, sort breadth-first."""
    import kaldifst

    fst = _determinize_minimize(arrays_to_fst(supervision))
    kaldifst.arcsort(fst, sort_type="olabel")
    composed = kaldifst.compose(fst, normalization_fst)
    if composed.num_states == 0:
        raise ValueError("supervision has no path the denominator graph allows")
    return sort_breadth_first(fst_to_arrays(_determinize_minimize(composed)))


def alignment_supervision(
    phones: Sequence[int],
    durations: Sequence[int],
    ctx_dep,
    trans_model,
    normalization_fst=None,
    opts: SupervisionOptions | None = None,
) -> FstArrays:
    """The numerator acceptor of one aligned utterance (weighted by the normalisation
    FST when one is given)."""
    proto = alignment_to_proto_supervision(phones, durations, opts or SupervisionOptions())
    sup = proto_to_supervision(proto, ctx_dep, trans_model)
    if normalization_fst is None:
        return sort_breadth_first(fst_to_arrays(_determinize_minimize(arrays_to_fst(sup))))
    return add_weight_to_supervision(normalization_fst, sup)
