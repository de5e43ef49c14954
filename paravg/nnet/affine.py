"""Updatable affine components and the plain SGD step (Kaldi ``AffineComponent``).

The training loop never calls an optimiser: after ``loss.backward()`` each component is
asked for its *step* (the parameter change, learning rate included), the steps are
limited by Kaldi's per-component max-change and global max-param-change, and then added
(``src/nnet3/nnet-utils.cc: UpdateNnetWithMaxChange``). A natural-gradient component
(:class:`paravg.nnet.ng_affine.NaturalGradientAffine`) overrides :meth:`Affine.delta` only,
so the loop is the same for both.

Kaldi maximises F = sum over the minibatch of weighted log-probs (summed, not averaged);
we minimise loss = -F, so the plain step is Δθ = -lr · ∂loss/∂θ = lr · ∂F/∂θ.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Affine(nn.Module):
    """y = x Wᵀ + b over the last axis, with a per-component ``max_change`` (0 = off).

    ``use_bias=False`` is Kaldi's ``LinearComponent`` (or a ``TdnnComponent`` with
    ``use-bias=false``): y = x Wᵀ, and the component has one parameter. Two more per-
    component settings are read by the training loop (:mod:`paravg.train_job`):
    ``l2_regularize`` (λ, Kaldi's ``l2-regularize``) and ``orthonormal_constraint``
    (Kaldi's ``orthonormal-constraint``: 0 = none, < 0 = floating semi-orthogonal,
    :mod:`paravg.nnet.orthonormal`). Both are 0 for the TDNN's layers.
    """

    def __init__(
        self, in_dim: int, out_dim: int, max_change: float = 0.0, use_bias: bool = True
    ) -> None:
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.max_change = float(max_change)
        self.l2_regularize = 0.0
        self.orthonormal_constraint = 0.0
        self.weight = nn.Parameter(torch.zeros(self.out_dim, self.in_dim))
        if use_bias:
            self.bias = nn.Parameter(torch.zeros(self.out_dim))
        else:
            self.register_parameter("bias", None)

    @property
    def use_bias(self) -> bool:
        return self.bias is not None

    def update_params(self) -> list[nn.Parameter]:
        """The parameters a step updates, in the order :meth:`delta` returns steps."""
        return [self.weight] if self.bias is None else [self.weight, self.bias]

    def init_kaldi(
        self,
        generator: torch.Generator,
        param_stddev: float | None = None,
        bias_stddev: float = 1.0,
    ) -> None:
        """Kaldi's NaturalGradientAffineComponent init: W ~ N(0, 1/in_dim), b ~ N(0, σ_b²)."""
        if param_stddev is None:
            param_stddev = 1.0 / math.sqrt(self.in_dim)
        with torch.no_grad():
            self.weight.copy_(torch.randn(self.weight.shape, generator=generator) * param_stddev)
            if self.bias is not None:
                self.bias.copy_(torch.randn(self.bias.shape, generator=generator) * bias_stddev)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight, self.bias)

    def delta(self, lr: float) -> list[torch.Tensor]:
        """The plain SGD step for :meth:`update_params` after backward of loss = -F."""
        return [-lr * p.grad for p in self.update_params()]

    def reset_state(self) -> None:
        """Plain SGD keeps no state between minibatches."""

    def extra_repr(self) -> str:
        bias = "" if self.use_bias else ", use_bias=False"
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}, max_change={self.max_change}{bias}"


def plain_affine_factory(
    in_dim: int, out_dim: int, max_change: float = 0.0, use_bias: bool = True
) -> Affine:
    """Factory with the signature the model builder expects (see :mod:`paravg.nnet.ng_affine`)."""
    return Affine(in_dim, out_dim, max_change, use_bias)
