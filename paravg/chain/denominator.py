"""The denominator forward-backward with the leaky HMM: Kaldi's ``DenominatorComputation``
(``src/chain/chain-denominator.{h,cc}``), in the probability domain with per-frame
rescaling and an explicit backward pass.

Input: ``nnet_output`` ``x`` of shape ``(T, B, P)`` (frame, sequence, pdf; Kaldi's rows
are ``t · B + b``), the :class:`~paravg.chain.den_graph.DenominatorGraph` (arcs
``i → j`` with pdf ``k`` and probability ``p``; initial probabilities ``π``) and the
leaky-HMM coefficient ``η``. With ``e_t(k) = exp(clamp(x_t(k), -30, 30))``:

* ``AlphaFirstFrame``: ``α_0 = π``. For ``t = 1 .. T`` (``AlphaGeneralFrame``):
  ``α_t(j) = (1 / s_{t-1}) Σ_{arcs i→j, k} α'_{t-1}(i) p e_{t-1}(k)``.
* ``AlphaDash``: ``s_t = Σ_j α_t(j)`` and ``α'_t = α_t + η s_t π`` (the leaky HMM: from
  every state, with probability ``η``, re-enter at a state drawn from ``π``).
* ``ComputeTotLogLike``: ``log Z = log Σ_j α'_T(j) + Σ_{t<T} log s_t`` (the rescalings
  ``1/s_t`` are the "arbitrary scale" Kaldi corrects for; every state may end).
* Backward (``BetaDashLastFrame``, ``BetaDashGeneralFrame``, ``Beta``):
  ``β'_T = 1 / Σ_j α'_T(j)``; ``β_t = β'_t + η Σ_j π_j β'_t(j)``;
  ``β'_t(i) = (1 / s_t) Σ_{arcs i→j, k} p e_t(k) β_{t+1}(j)``; the occupancy of an arc at
  ``t`` is ``γ_t(arc) = α'_t(i) p e_t(k) β_{t+1}(j) / s_t`` and
  ``∂ log Z / ∂ x_t(k) = Σ_{arcs with pdf k} γ_t(arc)``, which sums to 1 over ``k``
  for every frame and sequence (the clamp is ignored in the derivative, as Kaldi does;
  ``out_of_range_regularize`` keeps the outputs inside it).

Every step is ``index_select`` / ``index_add_`` over the arcs with the sequences as the
contiguous last dimension (Kaldi's layout), so the same code runs on CUDA tensors.
Memory: ``α'`` for all frames, ``(T + 1) · S · B`` values; autograd through the loop would
instead keep ``B ×`` arcs values per frame. :class:`DenominatorLogZ` wraps it as a
``torch.autograd.Function``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from paravg.chain.den_graph import DenominatorGraph

EXP_LIMIT = 30.0


@dataclass
class DenForward:
    """What the backward pass needs: ``exp_x`` (T, P, B), ``alpha`` (α', T+1, S, B),
    ``sums`` (s_t, T+1, B), ``tot_prob`` (Σ α'_T, B)."""

    exp_x: torch.Tensor
    alpha: torch.Tensor
    sums: torch.Tensor
    tot_prob: torch.Tensor


def check_leaky(leaky: float) -> None:
    # Kaldi requires 0 < η < 1; η = 0 (no leak) is allowed here for tests
    if not 0.0 <= leaky < 1.0:
        raise ValueError(f"leaky_hmm_coefficient must be in [0, 1), got {leaky}")


def den_forward(graph: DenominatorGraph, x: torch.Tensor, leaky: float):
    """``Forward``: per-sequence ``log Z`` (B,) and the saved state."""
    check_leaky(leaky)
    T, B, P = x.shape
    if graph.num_pdfs != P:
        raise ValueError(f"nnet output has {P} columns, the den graph {graph.num_pdfs} pdfs")
    S = graph.num_states
    exp_x = x.detach().clamp(-EXP_LIMIT, EXP_LIMIT).exp().transpose(1, 2).contiguous()
    init = graph.initial_probs.to(x.dtype)[:, None]
    prob = graph.prob.to(x.dtype)[:, None]
    src, dst, pdf = graph.from_state, graph.to_state, graph.pdf
    alpha = x.new_empty(T + 1, S, B)
    sums = x.new_empty(T + 1, B)
    alpha[0] = init.expand(S, B)
    sums[0] = alpha[0].sum(0)
    alpha[0].addcmul_(init, sums[0][None], value=leaky)
    for t in range(1, T + 1):
        vals = alpha[t - 1].index_select(0, src)
        vals.mul_(exp_x[t - 1].index_select(0, pdf)).mul_(prob)
        this = alpha[t].zero_().index_add_(0, dst, vals)
        this.div_(sums[t - 1][None])
        sums[t] = this.sum(0)
        this.addcmul_(init, sums[t][None], value=leaky)
    tot_prob = alpha[T].sum(0)
    logz = tot_prob.log() + sums[:T].log().sum(0)
    return logz, DenForward(exp_x, alpha, sums, tot_prob)


def den_backward(graph: DenominatorGraph, saved: DenForward, leaky: float) -> torch.Tensor:
    """``Backward``: ``∂ log Z_b / ∂ x_t(k)``, shape (T, B, P) (the pdf occupancies)."""
    exp_x, alpha, sums = saved.exp_x, saved.alpha, saved.sums
    T, P, B = exp_x.shape
    S = graph.num_states
    init = graph.initial_probs.to(exp_x.dtype)[:, None]
    prob = graph.prob.to(exp_x.dtype)[:, None]
    src, dst, pdf = graph.from_state, graph.to_state, graph.pdf
    deriv = exp_x.new_zeros(T, P, B)
    beta = (1.0 / saved.tot_prob)[None].expand(S, B).clone()  # β'_T
    beta.add_(leaky * (init * beta).sum(0)[None])  # β_T
    for t in range(T - 1, -1, -1):
        vf = beta.index_select(0, dst)
        vf.mul_(exp_x[t].index_select(0, pdf)).mul_(prob)
        inv_scale = 1.0 / sums[t][None]
        beta_dash = exp_x.new_zeros(S, B).index_add_(0, src, vf).mul_(inv_scale)
        occ = vf.mul_(alpha[t].index_select(0, src)).mul_(inv_scale)
        deriv[t].index_add_(0, pdf, occ)
        beta = beta_dash.add_(leaky * (init * beta_dash).sum(0)[None])
    return deriv.transpose(1, 2)


class DenominatorLogZ(torch.autograd.Function):
    """``log Z`` per sequence with the explicit backward of :func:`den_backward`."""

    @staticmethod
    def forward(ctx, x, graph: DenominatorGraph, leaky: float):
        logz, saved = den_forward(graph, x, leaky)
        ctx.graph, ctx.saved, ctx.leaky = graph, saved, leaky
        return logz

    @staticmethod
    def backward(ctx, grad_logz):
        deriv = den_backward(ctx.graph, ctx.saved, ctx.leaky)
        return deriv * grad_logz.to(deriv.dtype)[None, :, None], None, None


def denominator_logz(graph: DenominatorGraph, x: torch.Tensor, leaky: float) -> torch.Tensor:
    """Differentiable per-sequence denominator ``log Z`` of ``x`` (T, B, P)."""
    return DenominatorLogZ.apply(x, graph, leaky)
