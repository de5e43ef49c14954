"""The numerator forward-backward in log space: Kaldi's ``NumeratorComputation``
(``src/chain/chain-numerator.{h,cc}``).

A numerator is one supervision acceptor per sequence (labels pdf-id + 1, weights
``-log p``, every path exactly ``T`` arcs long: each arc consumes one output frame).
:class:`NumeratorGraph` batches ``B`` of them: all states numbered together, each with
its time ``τ(s)`` (the number of arcs from its start), arcs sorted by the time of their
source. With ``x`` the nnet output (T, B, P), in log space:

* ``log α(start_b) = 0``; for an arc ``s → d`` with pdf ``k`` and log-probability ``w`` at
  ``t = τ(s)``: ``log α(d) = logsumexp_{arcs → d} (log α(s) + w + x_t(b, k))``;
* ``log P_b = logsumexp_{final s of b} (log α(s) + log final(s))``;
* ``log β`` likewise backwards from ``log final``; the occupancy of an arc is
  ``γ = exp(log α(s) + w + x_t(b, k) + log β(d) - log P_b)`` and
  ``∂ log P_b / ∂ x_t(b, k) = Σ_{arcs at t with pdf k} γ``.

Numerators are small (a few states per frame), so the log domain costs little; the
occupancies are also the targets of the ``output-xent`` branch (Kaldi's
``xent_output_deriv``). The objective joins both as
``log P + Σ γ·(x − stop_gradient(x))``, whose gradient is ``γ`` (one pass, no autograd
through the frame loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from paravg.chain.fst_arrays import FstArrays


def state_times(a: FstArrays) -> np.ndarray:
    """τ(s) of an acyclic acceptor whose paths from the start all reach a state after the
    same number of arcs (``SortBreadthFirstSearch``'s premise); raises otherwise."""
    times = np.full(a.num_states, -1, dtype=np.int64)
    times[a.start] = 0
    frontier = [a.start]
    out: dict[int, list[int]] = {}
    for i, s in enumerate(a.src.tolist()):
        out.setdefault(s, []).append(i)
    while frontier:
        nxt = []
        for s in frontier:
            for i in out.get(s, []):
                d = int(a.dst[i])
                if times[d] == -1:
                    times[d] = times[s] + 1
                    nxt.append(d)
                elif times[d] != times[s] + 1:
                    raise ValueError("supervision FST is not time-synchronous (or has a cycle)")
        frontier = nxt
    return times


@dataclass
class NumeratorGraph:
    """B supervision acceptors of T frames, batched (see the module docstring)."""

    num_sequences: int
    frames: int
    num_states: int
    src: torch.Tensor  # int64 [A], arcs sorted by frame
    dst: torch.Tensor
    pdf: torch.Tensor
    seq: torch.Tensor
    log_prob: torch.Tensor  # [A]
    frame_offsets: list[int]  # arcs of frame t: [frame_offsets[t], frame_offsets[t+1])
    starts: torch.Tensor  # int64 [B]
    final_states: torch.Tensor  # int64 [F]
    final_seq: torch.Tensor  # int64 [F]
    final_log_prob: torch.Tensor  # [F]

    @classmethod
    def from_fsts(
        cls, fsts: Sequence[FstArrays], frames: int, num_pdfs: int, dtype=torch.float64
    ) -> NumeratorGraph:
        """Batch supervision acceptors (pdf-id + 1 labels) of ``frames`` frames each."""
        src, dst, pdf, seq, logp, frame = [], [], [], [], [], []
        starts, fstates, fseq, flogp = [], [], [], []
        offset = 0
        for b, a in enumerate(fsts):
            times = state_times(a)
            if np.any(a.ilabel < 1) or np.any(a.ilabel > num_pdfs):
                raise ValueError(f"supervision {b}: labels must be pdf-id + 1 in [1, {num_pdfs}]")
            finals = np.flatnonzero(np.isfinite(a.final))
            if len(finals) == 0 or np.any(times[finals] != frames):
                raise ValueError(f"supervision {b}: final states must all be at frame {frames}")
            src.append(a.src + offset)
            dst.append(a.dst + offset)
            pdf.append(a.ilabel - 1)
            seq.append(np.full(len(a.src), b))
            logp.append(-a.weight)
            frame.append(times[a.src])
            starts.append(a.start + offset)
            fstates.append(finals + offset)
            fseq.append(np.full(len(finals), b))
            flogp.append(-a.final[finals])
            offset += a.num_states
        frame = np.concatenate(frame)
        order = np.argsort(frame, kind="stable")
        bounds = np.searchsorted(frame[order], np.arange(frames + 1))

        def t(x, dt=torch.int64):
            return torch.from_numpy(np.ascontiguousarray(x)).to(dt)

        return cls(
            num_sequences=len(fsts),
            frames=frames,
            num_states=offset,
            src=t(np.concatenate(src)[order]),
            dst=t(np.concatenate(dst)[order]),
            pdf=t(np.concatenate(pdf)[order]),
            seq=t(np.concatenate(seq)[order]),
            log_prob=t(np.concatenate(logp)[order], dtype),
            frame_offsets=[int(v) for v in bounds],
            starts=t(np.array(starts)),
            final_states=t(np.concatenate(fstates)),
            final_seq=t(np.concatenate(fseq)),
            final_log_prob=t(np.concatenate(flogp), dtype),
        )

    def to(self, device=None) -> NumeratorGraph:
        fields = {k: v.to(device) if torch.is_tensor(v) else v for k, v in vars(self).items()}
        return NumeratorGraph(**fields)


def _scatter_logsumexp(vals: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """out[i] = log Σ_{j: index[j] = i} exp(vals[j]) (-inf where nothing lands)."""
    m = vals.new_full((size,), -torch.inf).scatter_reduce_(0, index, vals, "amax")
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = vals.new_zeros(size).index_add_(0, index, (vals - m_safe[index]).exp())
    return m_safe + s.log()


def num_forward_backward(graph: NumeratorGraph, x: torch.Tensor):
    """(log P per sequence (B,), ∂ log P_b / ∂ x (T, B, P))."""
    T, B, P = x.shape
    if (graph.frames, graph.num_sequences) != (T, B):
        raise ValueError(f"nnet output is {T}x{B}, the numerator {graph.frames}x{B} frames")
    x = x.detach()
    lp = graph.log_prob.to(x.dtype)
    N = graph.num_states
    frames = torch.repeat_interleave(
        torch.arange(T, device=x.device),
        torch.tensor(np.diff(graph.frame_offsets), device=x.device),
    )
    arc_x = x[frames, graph.seq, graph.pdf] + lp
    alpha = x.new_full((N,), -torch.inf)
    alpha[graph.starts] = 0.0
    for t in range(T):
        lo, hi = graph.frame_offsets[t], graph.frame_offsets[t + 1]
        if hi > lo:
            vals = alpha[graph.src[lo:hi]] + arc_x[lo:hi]
            new = _scatter_logsumexp(vals, graph.dst[lo:hi], N)
            reached = torch.isfinite(new)
            alpha = torch.where(reached, new, alpha)
    end = alpha[graph.final_states] + graph.final_log_prob.to(x.dtype)
    logp = _scatter_logsumexp(end, graph.final_seq, B)
    beta = x.new_full((N,), -torch.inf)
    beta[graph.final_states] = graph.final_log_prob.to(x.dtype)
    for t in range(T - 1, -1, -1):
        lo, hi = graph.frame_offsets[t], graph.frame_offsets[t + 1]
        if hi > lo:
            vals = beta[graph.dst[lo:hi]] + arc_x[lo:hi]
            new = _scatter_logsumexp(vals, graph.src[lo:hi], N)
            beta = torch.where(torch.isfinite(new), new, beta)
    occ = (alpha[graph.src] + arc_x + beta[graph.dst] - logp[graph.seq]).exp()
    deriv = x.new_zeros(T * B * P)
    deriv.index_add_(0, (frames * B + graph.seq) * P + graph.pdf, occ)
    return logp, deriv.view(T, B, P)
