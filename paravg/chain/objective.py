"""The chain objective: Kaldi's ``ComputeChainObjfAndDeriv`` and ``ChainTrainingOptions``
(``src/chain/chain-training.{h,cc}``).

For a minibatch of ``B`` sequences of ``T`` output frames with supervision weight ``w``
(the chain output ``x``, no softmax, shape (T, B, P)):

* ``objf = w Σ_b (log P_num,b(x) - log Z_den,b(x))``, numerator from
  :mod:`~paravg.chain.numerator`, denominator (leaky HMM) from
  :mod:`~paravg.chain.denominator`; ``weight = w · B · T`` (what objf is divided by for
  the per-frame figure). Derivative: ``w (γ_num - γ_den)``.
* ``l2_regularize``: ``l2_term = -½ w λ Σ x²`` (derivative ``-w λ x``), reported apart
  from objf.
* ``out_of_range_regularize`` ``c``: derivative ``-c (x - clamp(x, -30, 30))`` only (no
  objf term); it keeps outputs inside the range the denominator's ``exp`` is clamped to.
  Kaldi applies it on every other minibatch at ``2c`` (at random); here on every
  minibatch at ``c``, the same in expectation and reproducible.
* ``xent_regularize``: the network's ``output-xent`` branch (log-softmax) is trained
  towards the numerator occupancies ``γ_num`` (Kaldi's ``xent_output_deriv``): the
  trainer adds ``xent_regularize · Σ γ_num · log_softmax(y)`` to what it maximises;
  :func:`xent_objective` computes that term from :attr:`ChainObjective.num_post`.
* A non-finite objf, or (in :func:`compute_chain_objf_and_deriv`) denominator
  occupancies at frame 0 that do not sum to ``B`` within 2 (``BetaGeneralFrameDebug``),
  zeroes the derivatives and reports ``objf = -10 · weight``, as Kaldi.

:func:`chain_objective` returns the objective with a differentiable ``loss`` (what a
PyTorch trainer calls ``backward()`` on: ``-(objf + l2_term + out-of-range term)``) whose
gradient is exactly Kaldi's ``-nnet_output_deriv``; :func:`compute_chain_objf_and_deriv`
returns Kaldi's explicit derivative instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from paravg.chain.den_graph import DenominatorGraph
from paravg.chain.denominator import EXP_LIMIT, den_backward, den_forward, denominator_logz
from paravg.chain.numerator import NumeratorGraph, num_forward_backward

DEFAULT_OBJF_PER_FRAME = -10.0


@dataclass(frozen=True)
class ChainTrainingOptions:
    """Kaldi's ``ChainTrainingOptions`` defaults; the recipes pass leaky 0.1, xent 0.1."""

    l2_regularize: float = 0.0
    out_of_range_regularize: float = 0.01
    leaky_hmm_coefficient: float = 1.0e-5
    xent_regularize: float = 0.0


@dataclass
class ChainObjective:
    """``objf``, ``l2_term``, ``weight`` as Kaldi returns them (floats); ``loss`` (a
    scalar tensor to call ``backward()`` on, or None from
    :func:`compute_chain_objf_and_deriv`); ``deriv`` (∂ objective / ∂ x, or None);
    ``num_post`` (numerator occupancies · w, (T, B, P), detached: the xent targets)."""

    objf: float
    l2_term: float
    weight: float
    num_post: torch.Tensor
    loss: torch.Tensor | None = None
    deriv: torch.Tensor | None = None
    ok: bool = True

    @property
    def per_frame(self) -> float:
        return (self.objf + self.l2_term) / self.weight


def _out_of_range_deriv(x: torch.Tensor, scale: float) -> torch.Tensor:
    return -scale * (x - x.clamp(-EXP_LIMIT, EXP_LIMIT))


def chain_objective(
    opts: ChainTrainingOptions,
    den_graph: DenominatorGraph,
    num_graph: NumeratorGraph,
    nnet_output: torch.Tensor,
    supervision_weight: float = 1.0,
) -> ChainObjective:
    """The objective with autograd: ``loss.backward()`` gives ``-nnet_output_deriv``."""
    x = nnet_output
    T, B, _ = x.shape
    w = float(supervision_weight)
    den = denominator_logz(den_graph, x, opts.leaky_hmm_coefficient)
    # the numerator's occupancies are both its gradient and the xent targets: one pass
    num_logp, num_occ = num_forward_backward(num_graph, x)
    num = num_logp.sum() + (num_occ * (x - x.detach())).sum()
    objf_t = w * (num - den.sum())
    weight = w * B * T
    objf = float(objf_t.detach())
    num_post = num_occ * w
    if not torch.isfinite(objf_t):
        zero = (x * 0).sum()
        return ChainObjective(
            DEFAULT_OBJF_PER_FRAME * weight, 0.0, weight, num_post.zero_(), zero, ok=False
        )
    total = objf_t
    l2_term = 0.0
    if opts.l2_regularize != 0.0:
        l2 = -0.5 * w * opts.l2_regularize * (x * x).sum()
        l2_term = float(l2.detach())
        total = total + l2
    if opts.out_of_range_regularize > 0.0:
        # a term whose gradient is the penalty's derivative and whose value is zero
        g = _out_of_range_deriv(x.detach(), opts.out_of_range_regularize)
        total = total + (g * (x - x.detach())).sum()
    return ChainObjective(objf, l2_term, weight, num_post, loss=-total)


@torch.no_grad()
def compute_chain_objf_and_deriv(
    opts: ChainTrainingOptions,
    den_graph: DenominatorGraph,
    num_graph: NumeratorGraph,
    nnet_output: torch.Tensor,
    supervision_weight: float = 1.0,
) -> ChainObjective:
    """``ComputeChainObjfAndDeriv``: the objective and Kaldi's explicit
    ``nnet_output_deriv`` (∂ (objf + l2_term) / ∂ x plus the out-of-range term)."""
    x = nnet_output
    T, B, _ = x.shape
    w = float(supervision_weight)
    den_logz, saved = den_forward(den_graph, x, opts.leaky_hmm_coefficient)
    den_occ = den_backward(den_graph, saved, opts.leaky_hmm_coefficient)
    del saved
    # BetaGeneralFrameDebug at t = 0: the occupancies must sum to B; off by > 2, the
    # minibatch is abandoned (Kaldi's ok = false)
    den_ok = abs(float(den_occ[0].sum()) - B) <= 2.0
    deriv = den_occ.mul_(-w)
    if opts.out_of_range_regularize > 0.0:
        deriv += _out_of_range_deriv(x, opts.out_of_range_regularize)
    num_logp, num_post = num_forward_backward(num_graph, x)
    num_post = num_post * w
    deriv += num_post
    objf_t = w * (num_logp.sum() - den_logz.sum())
    weight = w * B * T
    if not torch.isfinite(objf_t) or not den_ok:
        return ChainObjective(
            DEFAULT_OBJF_PER_FRAME * weight,
            0.0,
            weight,
            num_post.zero_(),
            deriv=deriv.zero_(),
            ok=False,
        )
    l2_term = 0.0
    if opts.l2_regularize != 0.0:
        scale = w * opts.l2_regularize
        l2_term = float(-0.5 * scale * (x * x).sum())
        deriv -= scale * x
    return ChainObjective(float(objf_t), l2_term, weight, num_post, deriv=deriv)


def xent_objective(xent_log_softmax: torch.Tensor, num_post: torch.Tensor) -> torch.Tensor:
    """The ``output-xent`` branch's objective ``Σ γ_num · log_softmax(y)`` (to be scaled
    by ``xent_regularize`` and maximised; its per-frame value is what Kaldi logs as the
    xent objective)."""
    return (num_post.to(xent_log_softmax.dtype) * xent_log_softmax).sum()
