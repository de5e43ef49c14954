"""Alignments (per-frame transition-ids): reading, writing, ``ali-to-pdf``,
``ali-to-phones``, ``convert-ali`` and the tree statistics of ``acc-tree-stats``.

A Kaldi alignment is, per utterance, one transition-id per frame. A transition-id names
a transition of a transition-state ``(phone, hmm-state, pdf)`` (``hmm/transition-model.cc``);
:class:`TransitionTable` holds, per transition-id ``a`` (index 0 unused), its phone,
HMM state, pdf, pdf-class, transition index and whether it leaves the phone (``IsFinal``).

* Files: Kaldi's ``ali.JOB`` tables. :func:`read_alignments` reads a binary or text ark,
  an scp or a ``.txt`` (``utt a_1 a_2 …``) (:func:`paravg.kaldi_io.iter_int_vectors`);
  :func:`write_alignments` writes binary int32 vectors (``.ark``) or text (``.txt``).
* ``SplitToPhones`` (``hmm/hmm-utils.cc``): a phone ends on the frame whose transition-id
  is final (the exit transition), so phone instances are the runs between those frames.
* ``ali-to-pdf``: ``pdf(a_t)``; ``ali-to-phones --per-frame``: ``phone(a_t)``;
  ``ali-to-phones``: the phone sequence.
* ``convert-ali`` (``ConvertAlignment``): the same phones, HMM states and transition
  indices under a new tree: frame ``t`` of phone instance ``i`` gets the transition-state
  ``(phone, state, pdf')`` with ``pdf' = tree'(window_i, pdf-class)``.
* ``acc-tree-stats`` (``hmm/tree-accu.cc``): each frame's phone window (width N, central
  P; 0 outside the utterance) and pdf-class, fed to
  :func:`paravg.gmm.tree_stats.accumulate_tree_stats` a chunk of
  :data:`paravg.gmm.accumulate.CHUNK_FRAMES` frames at a time, the chunks' stats summed
  as ``sum-tree-stats`` sums jobs' (the tables read one utterance at a time).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from paravg.errors import DataError
from paravg.gmm import accumulate as gmm_acc
from paravg.gmm.tree_stats import (
    TreeStats,
    accumulate_tree_stats,
    context_windows,
    sum_tree_stats,
)
from paravg.io import write_text_atomic
from paravg.kaldi_io import int32_vector_bytes, iter_int_vectors

_TUPLE = re.compile(r"(\w+)=(-?\d+)")


@dataclass
class TransitionTable:
    """Per transition-id arrays (index 0 unused, -1 there) of a ``TransitionModel``."""

    phone: np.ndarray
    hmm_state: np.ndarray
    pdf: np.ndarray
    pdf_class: np.ndarray
    trans_index: np.ndarray
    is_final: np.ndarray
    is_self_loop: np.ndarray
    tstate: np.ndarray  # transition-state of each transition-id
    state_of: dict  # (phone, hmm_state, forward_pdf, self_loop_pdf) -> transition-state
    first_tid: np.ndarray  # per transition-state (index 0 unused): its first transition-id
    pdf_classes: dict  # (phone, hmm_state) -> (forward pdf-class, self-loop pdf-class)

    @classmethod
    def of(cls, trans) -> TransitionTable:
        topo = trans.topo
        tuples = [dict((k, int(v)) for k, v in _TUPLE.findall(str(t))) for t in trans.tuples]
        state_of = {(t["phone"], t["hmm_state"], t["forward_pdf"], t["self_loop_pdf"]): s + 1
                    for s, t in enumerate(tuples)}  # fmt: skip
        n = trans.num_transition_ids + 1
        id2state = np.asarray(trans.id2state, np.int64)
        first_tid = np.asarray(trans.state2id, np.int64)
        phone, hmm_state, pdf, pdf_class, index, final, loops = (
            np.full(n, -1, np.int64) for _ in range(7)
        )
        classes = {}
        for tid in range(1, n):
            s = int(id2state[tid])
            t = tuples[s - 1]
            phone[tid], hmm_state[tid] = t["phone"], t["hmm_state"]
            index[tid] = tid - first_tid[s]
            loop = bool(trans.is_self_loop(tid))
            pdf[tid] = t["self_loop_pdf"] if loop else t["forward_pdf"]
            entry = topo.topology_for_phone(t["phone"])[t["hmm_state"]]
            pdf_class[tid] = entry.self_loop_pdf_class if loop else entry.forward_pdf_class
            classes[(t["phone"], t["hmm_state"])] = (
                entry.forward_pdf_class,
                entry.self_loop_pdf_class,
            )
            final[tid] = bool(trans.is_final(tid))
            loops[tid] = loop
        return cls(
            phone,
            hmm_state,
            pdf,
            pdf_class,
            index,
            final == 1,
            loops == 1,
            id2state.copy(),
            state_of,
            first_tid,
            classes,
        )


def read_alignments(path: str | Path) -> dict[str, np.ndarray]:
    """An alignment table (ark, scp or ``.txt``) as utt -> int32 transition-ids."""
    return {key: vec.astype(np.int32) for key, vec, _place in iter_int_vectors(path)}


def write_alignments(path: str | Path, alignments: Mapping[str, np.ndarray]) -> None:
    """Write ``ali.JOB``: binary Kaldi ark (``.ark``) or text (any other suffix)."""
    path = Path(path)
    if path.suffix == ".ark":
        data = b"".join(key.encode() + b" " + int32_vector_bytes(np.asarray(ali, np.int32))
                        for key, ali in alignments.items())  # fmt: skip
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    else:
        text = "".join(f"{key} {' '.join(map(str, ali))}\n" for key, ali in alignments.items())
        write_text_atomic(path, text)


def split_to_phones(table: TransitionTable, ali: np.ndarray) -> list[np.ndarray]:
    """``SplitToPhones`` (``SplitToPhonesInternal``, reordered graphs as
    compile-train-graphs makes them): a phone instance ends on its final transition-id
    plus the self-loops of the same transition-state that follow it (reordering puts a
    state's self-loops after its forward transition); a phone change without a final
    transition also ends one (Kaldi warns), as does the end of the alignment."""
    ali = np.asarray(ali, np.int64)
    ends = []
    i, n = 0, len(ali)
    while i < n:
        tid = ali[i]
        if table.is_final[tid]:
            while (
                i + 1 < n
                and table.is_self_loop[ali[i + 1]]
                and table.tstate[ali[i + 1]] == table.tstate[tid]
            ):
                i += 1
            ends.append(i + 1)
        elif i + 1 < n and table.phone[ali[i + 1]] != table.phone[tid]:
            ends.append(i + 1)
        i += 1
    pieces = np.split(ali, ends)
    return [p for p in pieces if len(p)]


def ali_to_pdf(table: TransitionTable, ali: np.ndarray) -> np.ndarray:
    """``ali-to-pdf``: per-frame pdf-ids."""
    return table.pdf[np.asarray(ali, np.int64)].astype(np.int32)


def ali_to_phones(table: TransitionTable, ali: np.ndarray, per_frame: bool = False) -> np.ndarray:
    """``ali-to-phones`` (the phone sequence) or ``--per-frame`` (a phone per frame)."""
    if per_frame:
        return table.phone[np.asarray(ali, np.int64)].astype(np.int32)
    return np.array([table.phone[p[0]] for p in split_to_phones(table, ali)], np.int32)


def frame_windows(
    table: TransitionTable, ali: np.ndarray, context_width: int, central_position: int
) -> np.ndarray:
    """Each frame's phone window ``[T, N]`` (the window of its phone instance)."""
    pieces = split_to_phones(table, ali)
    phones = [int(table.phone[p[0]]) for p in pieces]
    if not phones:
        return np.zeros((0, context_width), np.int64)
    windows = context_windows(phones, context_width, central_position)
    return np.repeat(windows, [len(p) for p in pieces], axis=0)


def acc_tree_stats(
    table: TransitionTable,
    feats: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    alignments: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    ci_phones: Iterable[int] = (),
    context_width: int = 3,
    central_position: int = 1,
    names: tuple[str, str] = ("features", "alignments"),
) -> TreeStats:
    """``acc-tree-stats --ci-phones``: one job's tree statistics from its alignments.

    The utterances with both features and an alignment
    (:func:`paravg.gmm.accumulate.aligned_utterances`: two mappings, or sorted ``(utt,
    value)`` streams merge-joined one utterance at a time, a table out of order or an
    alignment of the wrong length a :class:`~paravg.errors.DataError`) are gathered into
    chunks of :data:`paravg.gmm.accumulate.CHUNK_FRAMES` frames; each chunk's frames are
    pooled per event (:func:`paravg.gmm.tree_stats.accumulate_tree_stats`) and the chunks'
    stats added event by event as ``sum-tree-stats`` adds jobs' (running sum,
    :func:`paravg.gmm.tree_stats.sum_tree_stats`). Both give the events in one order,
    ``np.unique``'s (sorted rows), so the result's events and counts do not depend on the
    chunking and Σx, Σx² only by float rounding; a job of one chunk (the demo's, the
    tests') is one pass, bit for bit."""
    stats: TreeStats | None = None
    utterances = gmm_acc.aligned_utterances(feats, alignments, names)
    for chunk in gmm_acc.frame_chunks(utterances, gmm_acc.CHUNK_FRAMES):
        windows, classes, rows = [], [], []
        for _utt, x, ali in chunk:
            ali = np.asarray(ali, np.int64)
            windows.append(frame_windows(table, ali, context_width, central_position))
            classes.append(table.pdf_class[ali])
            rows.append(np.asarray(x, np.float64))
        part = accumulate_tree_stats(
            np.concatenate(windows), np.concatenate(classes), np.concatenate(rows),
            central_position, ci_phones=ci_phones,
        )  # fmt: skip
        stats = part if stats is None else sum_tree_stats([stats, part])
    if stats is None:
        raise DataError(
            f"acc-tree-stats: no utterance has both features ({names[0]}) and an alignment "
            f"({names[1]})"
        )
    return stats


def convert_alignment(
    old: TransitionTable, new: TransitionTable, new_ctx, ali: np.ndarray
) -> np.ndarray:
    """``convert-ali old.mdl new.mdl tree``: ``ali`` under the new model's tree (same
    topology): every frame keeps its phone, HMM state and transition index."""
    width, central = new_ctx.context_width, new_ctx.central_position
    pieces = split_to_phones(old, ali)
    phones = [int(old.phone[p[0]]) for p in pieces]
    windows = context_windows(phones, width, central) if phones else []
    out = []
    for piece, window in zip(pieces, windows, strict=True):
        window = [int(w) for w in window]
        for tid in piece:
            phone, state, idx = (
                int(old.phone[tid]),
                int(old.hmm_state[tid]),
                int(old.trans_index[tid]),
            )
            pdfs = []
            for pdf_class in old.pdf_classes[(phone, state)]:
                ok, pdf = new_ctx.compute(window, pdf_class)
                if not ok:
                    raise ValueError(
                        f"convert-ali: the new tree has no pdf for {window}, class {pdf_class}"
                    )
                pdfs.append(pdf)
            s = new.state_of[(phone, state, pdfs[0], pdfs[1])]
            out.append(int(new.first_tid[s]) + idx)
    return np.asarray(out, np.int32)


def frame_agreement(
    phones_per_frame: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
    phone_map: Sequence[int] | np.ndarray,
) -> float:  # fmt: skip
    """Fraction of frames whose aligned phone, mapped by ``phone_map`` (phone id -> label
    id, e.g. the base phone's target id), equals the reference label (utterances in both;
    lengths cut to the shorter)."""
    phone_map = np.asarray(phone_map)
    agree = total = 0
    for u, ref in reference.items():
        if u not in phones_per_frame:
            continue
        n = min(len(ref), len(phones_per_frame[u]))
        agree += int(np.sum(phone_map[phones_per_frame[u][:n]] == np.asarray(ref)[:n]))
        total += n
    return agree / total if total else 0.0


def boundary_agreement(
    phones_per_frame: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
    phone_map: Sequence[int] | np.ndarray, tolerance: int = 2,
) -> float:  # fmt: skip
    """Fraction of the reference's label changes (phone boundaries) with a change of the
    mapped aligned phone within ``tolerance`` frames (2 frames = 20 ms)."""
    phone_map = np.asarray(phone_map)
    hits = total = 0
    for u, ref in reference.items():
        if u not in phones_per_frame:
            continue
        n = min(len(ref), len(phones_per_frame[u]))
        ours = phone_map[phones_per_frame[u][:n]]
        ref_b = np.flatnonzero(np.diff(np.asarray(ref)[:n]) != 0) + 1
        our_b = np.flatnonzero(np.diff(ours) != 0) + 1
        total += len(ref_b)
        if len(our_b):
            hits += int(
                np.sum(np.min(np.abs(ref_b[:, None] - our_b[None, :]), axis=1) <= tolerance)
            )
    return hits / total if total else 0.0
