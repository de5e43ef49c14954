"""Updatable affine components and the plain SGD step (Kaldi ``AffineComponent``).

The training loop never calls an optimiser: after ``loss.backward()`` each component is
asked for its *step* (the parameter change, learning rate included), the steps are
limited by Kaldi's per-component max-change and global max-param-change, and then added
(``src/nnet3/nnet-utils.cc: UpdateNnetWithMaxChange``). A natural-gradient component
(``paravg.optim.ngsgd.NaturalGradientAffine``) overrides :meth:`Affine.delta` only, so the
loop is the same for both.

Kaldi maximises F = sum over the minibatch of weighted log-probs (summed, not averaged);
we minimise loss = -F, so the plain step is Δθ = -lr · ∂loss/∂θ = lr · ∂F/∂θ.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class Affine(nn.Module):
    """y = x Wᵀ + b over the last axis, with a per-component ``max_change`` (0 = off)."""

    def __init__(self, in_dim: int, out_dim: int, max_change: float = 0.0) -> None:
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.max_change = float(max_change)
        self.weight = nn.Parameter(torch.zeros(self.out_dim, self.in_dim))
        self.bias = nn.Parameter(torch.zeros(self.out_dim))

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
            self.bias.copy_(torch.randn(self.bias.shape, generator=generator) * bias_stddev)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight, self.bias)

    def delta(self, lr: float) -> list[torch.Tensor]:
        """The plain SGD step for [weight, bias] after backward of loss = -F."""
        return [-lr * self.weight.grad, -lr * self.bias.grad]

    def reset_state(self) -> None:
        """Plain SGD keeps no state between minibatches."""

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, out_dim={self.out_dim}, max_change={self.max_change}"


def plain_affine_factory(in_dim: int, out_dim: int, max_change: float = 0.0) -> Affine:
    """Factory with the signature the model builder expects (see ``paravg.optim.ngsgd``)."""
    return Affine(in_dim, out_dim, max_change)
