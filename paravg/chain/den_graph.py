"""The denominator graph as tensors: Kaldi's ``DenominatorGraph``
(``src/chain/chain-den-graph.{h,cc}``).

From the den FST (labels pdf-id + 1, weights ``-log p``) it keeps, per arc,
``from_state``, ``to_state``, ``pdf`` (= label - 1) and ``prob`` (= ``exp(-weight)``);
final probabilities are not used by the objective (every state may end a sequence).

``initial_probs`` (``SetInitialProbs``): with each state's outgoing mass normalised,
``n_s = 1 / (final_s + Σ_{arcs s→} p)``, a distribution started at the start state is
propagated 100 times, ``c'_d = Σ_{arcs s→d} c_s n_s p``, renormalised to sum 1 after each
step, and the 100 distributions before each step are averaged. These are the initial
probabilities of the HMM and the leaky HMM's re-entry distribution.

``normalization_fst`` (``GetNormalizationFst``): the den FST with a new start state that
has an epsilon arc to every state ``s`` with weight ``-log initial_probs[s]``, every old
state final with weight one, epsilons removed and arcs sorted. It is composed into every
numerator supervision so that numerator and denominator share transition weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from paravg.chain.fst_arrays import FstArrays, arrays_to_fst, fst_to_arrays

NUM_INITIAL_ITERS = 100


def initial_probs(a: FstArrays, num_iters: int = NUM_INITIAL_ITERS) -> np.ndarray:
    """``DenominatorGraph::SetInitialProbs`` (float64)."""
    n = a.num_states
    prob = np.exp(-a.weight)
    tot = np.exp(-a.final) + np.bincount(a.src, weights=prob, minlength=n)
    if not np.all((tot > 0) & (tot < 100)):
        raise ValueError("den FST state with outgoing probability mass not in (0, 100)")
    norm = 1.0 / tot
    cur = np.zeros(n)
    cur[a.start] = 1.0
    avg = np.zeros(n)
    for _ in range(num_iters):
        avg += cur / num_iters
        nxt = np.bincount(a.dst, weights=cur[a.src] * norm[a.src] * prob, minlength=n)
        cur = nxt / nxt.sum()
    return avg


def normalization_fst(den_fst, init: np.ndarray | None = None):
    """``GetNormalizationFst``: a new start with epsilons weighted by the initial
    probabilities into the den FST, every den state final (weight one), epsilons removed."""
    import kaldifst

    a = fst_to_arrays(den_fst)
    init = initial_probs(a) if init is None else init
    if np.any(init <= 0):
        raise ValueError("a den FST state has zero initial probability (not connected?)")
    n = a.num_states
    fst = arrays_to_fst(
        FstArrays(
            num_states=n + 1,
            start=n,
            src=np.concatenate([a.src, np.full(n, n)]),
            dst=np.concatenate([a.dst, np.arange(n)]),
            ilabel=np.concatenate([a.ilabel, np.zeros(n, dtype=np.int64)]),
            olabel=np.concatenate([a.olabel, np.zeros(n, dtype=np.int64)]),
            weight=np.concatenate([a.weight, -np.log(init)]),
            final=np.concatenate([np.zeros(n), [np.inf]]),
        )
    )
    kaldifst.rmepsilon(fst)
    kaldifst.arcsort(fst, sort_type="ilabel")
    return fst


@dataclass
class DenominatorGraph:
    """The den graph's arcs as tensors (Kaldi keeps them as CUDA arrays of transitions).

    ``from_state``, ``to_state``, ``pdf``: int64 [A]; ``prob``: [A]; ``initial_probs``:
    [S]. :meth:`to` moves it to a device or dtype (the objective runs on either).
    """

    num_states: int
    num_pdfs: int
    from_state: torch.Tensor
    to_state: torch.Tensor
    pdf: torch.Tensor
    prob: torch.Tensor
    initial_probs: torch.Tensor

    @property
    def num_arcs(self) -> int:
        return int(self.from_state.numel())

    @classmethod
    def from_arrays(cls, a: FstArrays, num_pdfs: int, dtype=torch.float32) -> DenominatorGraph:
        pdf = a.ilabel - 1
        if len(pdf) and (pdf.min() < 0 or pdf.max() >= num_pdfs):
            raise ValueError(f"den FST labels must be pdf-id + 1 in [1, {num_pdfs}]")
        return cls(
            num_states=a.num_states,
            num_pdfs=num_pdfs,
            from_state=torch.from_numpy(a.src.copy()),
            to_state=torch.from_numpy(a.dst.copy()),
            pdf=torch.from_numpy(pdf.copy()),
            prob=torch.from_numpy(np.exp(-a.weight)).to(dtype),
            initial_probs=torch.from_numpy(initial_probs(a)).to(dtype),
        )

    @classmethod
    def from_fst(cls, den_fst, num_pdfs: int, dtype=torch.float32) -> DenominatorGraph:
        return cls.from_arrays(fst_to_arrays(den_fst), num_pdfs, dtype)

    def to(self, device=None, dtype=None) -> DenominatorGraph:
        def f(x):
            return x.to(device=device, dtype=dtype if x.is_floating_point() else None)

        return DenominatorGraph(
            self.num_states,
            self.num_pdfs,
            f(self.from_state),
            f(self.to_state),
            f(self.pdf),
            f(self.prob),
            f(self.initial_probs),
        )
