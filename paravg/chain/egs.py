"""Chain egs supervision: Kaldi's ``SupervisionSplitter`` (``src/chain/chain-supervision.cc``)
and the supervision part of ``nnet3-chain-get-egs`` (``src/chainbin/``), as
``steps/nnet3/chain/get_egs.sh`` runs them.

An utterance's targets are per-frame phone ids (target ``k`` is chain phone ``k + 1``:
the chain topology's phones start at 1). Its supervision is built once per utterance
(:func:`utterance_supervision`: the runs of equal targets as phones and durations,
``alignment_supervision`` without weights; a time-sorted acceptor over output frames).
A chunk whose first input frame is ``s`` and which has ``n`` output frames takes output
frames ``s / f … s / f + n − 1`` of it (``f`` the frame subsampling factor; Kaldi's chain
egs start on multiples of ``f``; a chunk starting at phase ``s mod f ≠ 0`` uses the
supervision of the utterance with its first ``s mod f`` frames dropped, built once per
phase):

* ``GetFrameRange`` / ``CreateRangeFst``: the states at times ``b … b + n``, a new start
  state with an ε-arc to every state at time ``b``, every state at time ``b + n`` final,
  only arcs leaving states at ``b … b + n − 1``; then ``RmEpsilon``;
* ``AddWeightToSupervisionFst`` (``nnet3-chain-get-egs`` with the normalisation FST):
  determinise, minimise, compose with the normalisation FST, determinise, minimise, sort
  breadth-first (:func:`paravg.chain.supervision.add_weight_to_supervision`).

A chunk whose output frames reach past the utterance's gets no supervision (an empty
row, skipped by training). The chunk supervisions are stored as flat arrays with
offsets (:class:`SupervisionTable`): one minibatch's numerator graph is a gather of its
rows' arc ranges (:meth:`SupervisionTable.numerator_graph`), no FST object per eg.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from paravg.chain.fst_arrays import FstArrays, arrays_to_fst, fst_to_arrays
from paravg.chain.numerator import state_times
from paravg.chain.supervision import (
    SupervisionOptions,
    add_weight_to_supervision,
    alignment_supervision,
    alignment_to_phone_durations,
)
from paravg.chain.table_files import TABLE_FIELDS, table_files


def targets_to_phones(frame_targets: Sequence[int]) -> tuple[list[int], list[int]]:
    """Per-frame targets -> chain (phones, durations): target ``k`` is phone ``k + 1``."""
    return alignment_to_phone_durations([int(t) + 1 for t in frame_targets])


def utterance_supervision(
    frame_targets: Sequence[int], ctx_dep, trans_model, opts: SupervisionOptions
) -> FstArrays:
    """The unweighted, time-sorted supervision of a whole utterance (what Kaldi's
    ``SupervisionSplitter`` is constructed with)."""
    phones, durations = targets_to_phones(frame_targets)
    return alignment_supervision(phones, durations, ctx_dep, trans_model, None, opts)


def supervision_range(sup: FstArrays, times: np.ndarray, begin: int, num_frames: int):
    """``SupervisionSplitter::GetFrameRange``: output frames ``begin … begin + num_frames
    − 1`` of the time-sorted ``sup`` (``times`` its state times) as a kaldifst acceptor
    (epsilon-removed, unweighted); None when the range reaches past ``sup``'s frames."""
    import kaldifst

    end = begin + num_frames
    if begin < 0 or num_frames <= 0 or end > int(times.max()):
        return None
    keep = (times >= begin) & (times <= end)
    new_id = np.full(sup.num_states, -1, dtype=np.int64)
    new_id[keep] = np.arange(1, int(keep.sum()) + 1)  # 0: the new start state
    arcs = keep[sup.src] & (times[sup.src] < end)
    firsts = new_id[np.flatnonzero(times == begin)]
    src = np.concatenate([np.zeros(len(firsts), dtype=np.int64), new_id[sup.src[arcs]]])
    dst = np.concatenate([firsts, new_id[sup.dst[arcs]]])
    lab = np.concatenate([np.zeros(len(firsts), dtype=np.int64), sup.ilabel[arcs]])
    n = int(keep.sum()) + 1
    final = np.full(n, np.inf)
    final[new_id[np.flatnonzero(times == end)]] = 0.0
    fst = arrays_to_fst(FstArrays(n, 0, src, dst, lab, lab.copy(), np.zeros(len(src)), final))
    kaldifst.rmepsilon(fst)
    return fst


class ChunkSupervisor:
    """The supervision of chunks of one utterance (``nnet3-chain-get-egs``'s
    ``ProcessFile``): one utterance supervision per phase, cut per chunk and weighted."""

    def __init__(
        self, frame_targets, ctx_dep, trans_model, normalization_fst, opts: SupervisionOptions
    ):
        self.targets = np.asarray(frame_targets)
        self.ctx_dep, self.trans_model = ctx_dep, trans_model
        self.norm, self.opts = normalization_fst, opts
        self._phases: dict[int, tuple[FstArrays, np.ndarray]] = {}

    def _phase(self, phase: int) -> tuple[FstArrays, np.ndarray]:
        if phase not in self._phases:
            sup = utterance_supervision(
                self.targets[phase:], self.ctx_dep, self.trans_model, self.opts
            )
            self._phases[phase] = (sup, state_times(sup))
        return self._phases[phase]

    def num_output_frames(self, phase: int = 0) -> int:
        """The output frames of the utterance's supervision starting at input frame
        ``phase`` (its last state's time)."""
        return int(self._phase(phase)[1].max())

    def chunk(self, first_frame: int, num_output_frames: int) -> FstArrays | None:
        """The weighted supervision of the chunk starting at input frame ``first_frame``
        with ``num_output_frames`` outputs; None when it reaches past the utterance."""
        f = self.opts.frame_subsampling_factor
        phase, begin = first_frame % f, first_frame // f
        if len(self.targets) - phase < f:
            return None
        sup, times = self._phase(phase)
        fst = supervision_range(sup, times, begin, num_output_frames)
        if fst is None:
            return None
        return add_weight_to_supervision(self.norm, fst_to_arrays(fst))


def output_frames(frames_per_eg: int, frame_subsampling_factor: int) -> int:
    """Output frames of an eg of ``frames_per_eg`` input frames: eg frames 0, f, 2f, …"""
    return -(-int(frames_per_eg) // int(frame_subsampling_factor))


@dataclass(frozen=True)
class SupervisionTable:
    """Chunk supervisions as flat arrays (one row per eg; an empty row: no supervision).

    ``state_offsets``, ``arc_offsets`` (n + 1,) int64: row ``i``'s states and arcs are
    ``[offsets[i], offsets[i + 1])``; ``frames`` (n,) its output frames; ``start`` (n,)
    its start state (row-local); arcs (row-local states, sorted by frame within a row):
    ``arc_src``, ``arc_dst``, ``arc_pdf`` (pdf id, 0-based), ``arc_frame`` (the source
    state's time), all int32, ``arc_logp`` float32 (log probability); ``final_logp``
    (states,) float32, ``-inf`` where not final.
    """

    state_offsets: np.ndarray
    arc_offsets: np.ndarray
    frames: np.ndarray
    start: np.ndarray
    arc_src: np.ndarray
    arc_dst: np.ndarray
    arc_pdf: np.ndarray
    arc_frame: np.ndarray
    arc_logp: np.ndarray
    final_logp: np.ndarray

    @property
    def num_rows(self) -> int:
        return len(self.frames)

    def has_supervision(self) -> np.ndarray:
        """(n,) bool: rows with a supervision."""
        return np.diff(self.arc_offsets) > 0

    @classmethod
    def from_fsts(cls, fsts: Sequence[FstArrays | None], frames: int) -> SupervisionTable:
        """Pack weighted chunk supervisions (pdf-id + 1 labels, ``frames`` arcs per path;
        None: a row without supervision)."""
        cols: dict[str, list[np.ndarray]] = {k: [] for k in TABLE_FIELDS[4:]}
        n_states, n_arcs, starts, nframes = [0], [0], [], []
        for a in fsts:
            if a is None or a.num_states == 0:
                n_states.append(n_states[-1])
                n_arcs.append(n_arcs[-1])
                starts.append(0)
                nframes.append(0)
                continue
            times = state_times(a)
            order = np.argsort(times[a.src], kind="stable")
            cols["arc_src"].append(a.src[order])
            cols["arc_dst"].append(a.dst[order])
            cols["arc_pdf"].append(a.ilabel[order] - 1)
            cols["arc_frame"].append(times[a.src][order])
            cols["arc_logp"].append(-a.weight[order])
            cols["final_logp"].append(-a.final)
            n_states.append(n_states[-1] + a.num_states)
            n_arcs.append(n_arcs[-1] + a.num_arcs)
            starts.append(a.start)
            nframes.append(frames)
        dtypes = {"arc_logp": np.float32, "final_logp": np.float32}
        flat = {
            k: np.concatenate(v).astype(dtypes.get(k, np.int32))
            if v
            else np.zeros(0, dtypes.get(k, np.int32))
            for k, v in cols.items()
        }
        return cls(
            state_offsets=np.asarray(n_states, dtype=np.int64),
            arc_offsets=np.asarray(n_arcs, dtype=np.int64),
            frames=np.asarray(nframes, dtype=np.int32),
            start=np.asarray(starts, dtype=np.int32),
            **flat,
        )

    def select(self, rows: Sequence[int]) -> SupervisionTable:
        """The table of ``rows`` in that order (an archive's shuffle or a subset)."""
        rows = np.asarray(rows, dtype=np.int64)
        s_idx, s_off = _ranges(self.state_offsets, rows)
        a_idx, a_off = _ranges(self.arc_offsets, rows)
        return SupervisionTable(
            state_offsets=s_off,
            arc_offsets=a_off,
            frames=np.asarray(self.frames)[rows],
            start=np.asarray(self.start)[rows],
            arc_src=np.asarray(self.arc_src)[a_idx],
            arc_dst=np.asarray(self.arc_dst)[a_idx],
            arc_pdf=np.asarray(self.arc_pdf)[a_idx],
            arc_frame=np.asarray(self.arc_frame)[a_idx],
            arc_logp=np.asarray(self.arc_logp)[a_idx],
            final_logp=np.asarray(self.final_logp)[s_idx],
        )

    def numerator_graph(self, rows: Sequence[int], num_pdfs: int, dtype=None):
        """The :class:`~paravg.chain.numerator.NumeratorGraph` of ``rows`` (all with a
        supervision of the same number of frames), batched in that order."""
        import torch

        from paravg.chain.numerator import NumeratorGraph

        rows = np.asarray(rows, dtype=np.int64)
        frames = np.asarray(self.frames)[rows]
        if len(rows) == 0 or np.any(frames <= 0) or np.any(frames != frames[0]):
            raise ValueError(f"rows {rows.tolist()}: need supervisions of one length")
        T = int(frames[0])
        s_idx, s_off = _ranges(self.state_offsets, rows)
        a_idx, a_off = _ranges(self.arc_offsets, rows)
        seq = np.repeat(np.arange(len(rows)), np.diff(a_off))
        base = s_off[:-1][seq]
        frame = np.asarray(self.arc_frame)[a_idx]
        if np.any(np.asarray(self.arc_pdf)[a_idx] >= num_pdfs):
            raise ValueError(f"supervision pdf ids beyond the model's {num_pdfs} outputs")
        order = np.argsort(frame, kind="stable")
        fin = np.asarray(self.final_logp)[s_idx]
        fstates = np.flatnonzero(np.isfinite(fin))
        fseq = np.searchsorted(s_off, fstates, side="right") - 1
        dtype = dtype or torch.float64

        def t(x, dt=torch.int64):
            return torch.from_numpy(np.ascontiguousarray(x)).to(dt)

        return NumeratorGraph(
            num_sequences=len(rows),
            frames=T,
            num_states=int(s_off[-1]),
            src=t((np.asarray(self.arc_src)[a_idx] + base)[order]),
            dst=t((np.asarray(self.arc_dst)[a_idx] + base)[order]),
            pdf=t(np.asarray(self.arc_pdf)[a_idx][order]),
            seq=t(seq[order]),
            log_prob=t(np.asarray(self.arc_logp)[a_idx][order], dtype),
            frame_offsets=[int(v) for v in np.searchsorted(frame[order], np.arange(T + 1))],
            starts=t(np.asarray(self.start)[rows] + s_off[:-1]),
            final_states=t(fstates),
            final_seq=t(fseq),
            final_log_prob=t(fin[fstates], dtype),
        )

    def save(self, prefix: str | os.PathLike) -> dict[str, str]:
        """Write ``P.chain.<field>.npy`` per field (atomically); returns field -> file."""
        from paravg.egs.archive import save_npy_atomic

        files = table_files(prefix)
        for name in TABLE_FIELDS:
            save_npy_atomic(files[name], np.ascontiguousarray(getattr(self, name)))
        return files

    @classmethod
    def load(cls, prefix: str | os.PathLike) -> SupervisionTable:
        """Memory-map the table written by :meth:`save`, offsets checked."""
        files = table_files(prefix)
        arrays = {k: np.load(files[k], mmap_mode="r") for k in TABLE_FIELDS}
        n = len(arrays["frames"])
        if (
            len(arrays["state_offsets"]) != n + 1
            or len(arrays["arc_offsets"]) != n + 1
            or int(arrays["arc_offsets"][-1]) != len(arrays["arc_src"])
            or int(arrays["state_offsets"][-1]) != len(arrays["final_logp"])
        ):
            raise ValueError(f"{prefix}: chain supervision offsets do not match its arrays")
        return cls(**arrays)


def _ranges(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The concatenated index ranges ``[offsets[r], offsets[r + 1])`` of ``rows`` and
    their new offsets."""
    offsets = np.asarray(offsets, dtype=np.int64)
    lo, hi = offsets[rows], offsets[rows + 1]
    lens = hi - lo
    new = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    idx = np.repeat(lo - new[:-1], lens) + np.arange(int(new[-1]), dtype=np.int64)
    return idx, new
